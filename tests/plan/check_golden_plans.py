#!/usr/bin/env python3
"""The orchestration's choices stay put: `korch optimize --cost analytic --backend reference` with
fixed machine figures (machine.json; the reference backend runs every candidate, so no backend's
coverage limits the choice) on the tiny paper models and the shipped example must choose exactly the
kernels recorded in golden_plans.json (the korch, greedy and per-op plans, as primitive sets).
A change to the optimiser, the candidates, the BLP or the analytic model that moves a choice
fails here; when the move is intended, regenerate the file with --update and say why in the
commit.

usage: check_golden_plans.py KORCH SOURCE_DIR WORK_DIR [--update]
"""
import json
import os
import subprocess
import sys


def models(source_dir):
    yield "tiny_cnn", os.path.join(source_dir, "examples", "tiny_cnn", "model.onnx")
    for name in ["candy", "segformer_b0", "efficientvit_b1", "yolox_nano", "yolov4", "bert_base", "resnet50"]:
        yield name, os.path.join(source_dir, "models", "paper", "cases", name + "_tiny", "model.onnx")


def plans_of(korch, model, machine, work):
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "korch.json")
    subprocess.run([korch, "optimize", model, "--cost", "analytic", "--backend", "reference", "--machine", machine,
                    "-o", plan, "--baselines", work], check=True, stdout=subprocess.DEVNULL)
    chosen = {}
    for strategy, path in [("korch", plan), ("greedy", os.path.join(work, "greedy.json")),
                           ("per-op", os.path.join(work, "per-op.json"))]:
        with open(path) as f:
            chosen[strategy] = [k["prims"] for k in json.load(f)["kernels"]]
    return chosen


def main():
    korch, source_dir, work = sys.argv[1:4]
    update = "--update" in sys.argv[4:]
    here = os.path.dirname(os.path.abspath(__file__))
    golden_path = os.path.join(here, "golden_plans.json")
    machine = os.path.join(here, "machine.json")
    golden = {} if update else json.load(open(golden_path))
    failures = 0
    for name, model in models(source_dir):
        chosen = plans_of(korch, model, machine, os.path.join(work, name))
        if update:
            golden[name] = chosen
            continue
        for strategy, kernels in golden[name].items():
            ok = chosen[strategy] == kernels
            failures += not ok
            print(f"{name:16} {strategy:7} {len(kernels):4} kernels  {'same' if ok else 'CHANGED'}")
    if update:
        with open(golden_path, "w") as f:
            json.dump(golden, f, separators=(",", ":"))
        print("wrote", golden_path)
        return 0
    print("PASS" if failures == 0 else f"FAIL: {failures} plans changed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
