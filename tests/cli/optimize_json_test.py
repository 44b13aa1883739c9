#!/usr/bin/env python3
"""korch optimize --json: the file parses, has every key with the right type, and agrees with
the summary korch prints (partitions, candidates, each plan's kernel count).

Usage: optimize_json_test.py KORCH_BINARY MODEL.onnx SCRATCH_DIR
"""
import json
import os
import re
import subprocess
import sys

NUMBER = (int, float)
KEYS = {
    "model": str, "primitives": int, "cost_model": str, "machine": dict, "partitions": dict,
    "candidates": int, "priced": int, "measured": int, "dropped": int, "mismatches": int,
    "solver_seconds": NUMBER, "total_seconds": NUMBER, "all_optimal": bool, "not_optimal_partitions": list,
    "profiling": (dict, type(None)), "plans": list, "predicted_speedup_vs_greedy": NUMBER, "plan_race": dict,
    "cache": (str, type(None)),
}
PLAN_RACE_KEYS = {"raced": bool, "greedy_kept": bool, "note": str, "korch_seconds": NUMBER,
                  "greedy_seconds": NUMBER, "rounds": int, "blp_kernels": int, "blp_predicted_seconds": NUMBER}


def main(korch, model, scratch):
    os.makedirs(scratch, exist_ok=True)
    path = os.path.join(scratch, "optimize_summary.json")
    if os.path.exists(path):
        os.remove(path)
    run = subprocess.run([korch, "optimize", model, "--cost", "analytic", "--json", path],
                         capture_output=True, text=True, timeout=300)
    out = run.stdout
    problems = []
    if run.returncode != 0:
        return ["exit %d: %s" % (run.returncode, run.stderr.strip())]
    with open(path) as f:
        j = json.load(f)

    def check_keys(obj, keys, where):
        for k, t in keys.items():
            if k not in obj:
                problems.append("%s: no key %r" % (where, k))
            elif not isinstance(obj[k], t) or (t in (int, NUMBER) and isinstance(obj[k], bool)):
                problems.append("%s: %r is %r" % (where, k, obj[k]))

    check_keys(j, KEYS, "summary")
    if problems:
        return problems
    check_keys(j["partitions"], {"total": int, "solved": int, "reused": int}, "partitions")
    check_keys(j["plan_race"], PLAN_RACE_KEYS, "plan_race")
    for p in j["plans"]:
        check_keys(p, {"strategy": str, "kernels": int, "predicted_seconds": NUMBER}, "plans[]")
    if problems:
        return problems
    if j["cost_model"] != "analytic" or j["profiling"] is not None or j["cache"] is not None:
        problems.append("analytic run: cost_model %r, profiling %r, cache %r" % (
            j["cost_model"], j["profiling"], j["cache"]))
    if j["plan_race"]["raced"]:
        problems.append("analytic run: a plan race ran")

    # The same facts as the printed summary.
    m = re.search(r"\((\d+) primitives\)", out)
    if not m or int(m.group(1)) != j["primitives"]:
        problems.append("primitives: printed %s, JSON %d" % (m and m.group(1), j["primitives"]))
    m = re.search(r"partitions: (\d+) \((\d+) solved, (\d+) reused\)\s+candidates: (\d+)\s+priced structures: (\d+)",
                  out)
    part = j["partitions"]
    if not m or [int(x) for x in m.groups()] != [part["total"], part["solved"], part["reused"], j["candidates"],
                                                 j["priced"]]:
        problems.append("partitions/candidates/priced: printed %s, JSON %s" % (m and m.groups(), part))
    printed = {p: int(k) for p, k in re.findall(r"^(per-primitive|per-op|greedy|korch)\s+(\d+)\s", out, re.M)}
    in_json = {p["strategy"]: p["kernels"] for p in j["plans"]}
    if printed != in_json or set(in_json) != {"per-primitive", "per-op", "greedy", "korch"}:
        problems.append("plans: printed %s, JSON %s" % (printed, in_json))
    if ("every partition proven optimal" in out) != j["all_optimal"]:
        problems.append("all_optimal %s disagrees with the summary" % j["all_optimal"])
    if "wrote " + path not in out:
        problems.append("no 'wrote %s' line" % path)
    return problems


if __name__ == "__main__":
    found = main(*sys.argv[1:4])
    for p in found:
        print("FAIL:", p)
    print("ok" if not found else "%d problem(s)" % len(found))
    sys.exit(1 if found else 0)
