#!/usr/bin/env python3
"""Acceptance check of korch.compile with measured costs (minutes; not part of the test suite).

For a torchvision ResNet-18 (1x3x224x224) and a 2-layer nn.TransformerEncoder (1x16x64, as
models/export_torchvision.py's transformer_encoder), both randomly initialised and made testable
as the model cases are (models/export_torchvision.py make_testable: BatchNorm statistics
calibrated, zero biases replaced), this
  1. compiles the module with cost="measured" into a fresh cache folder (cold: every kernel
     compiled and timed) and times it;
  2. compares the compiled module's output with PyTorch's on a seeded input: every element must
     satisfy |a - b| <= 1e-3 + 1e-3 |b| (the project's whole-model tolerance);
  3. compiles the same module again (warm: the plan comes from the cache) and times it, and
     times korch.load of the saved entry;
  4. times one inference of each (median of --runs).
Prints one JSON object per model and exits 1 when an output is out of tolerance or the second
compile did not reuse the cache.

Usage (with korch pip-installed in a venv that sees torch, e.g. .venv-korch):
    .venv-korch/bin/python bench/python_compile.py [--cache DIR] [--threads 2] [--models resnet18,encoder]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

import korch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from export_torchvision import make_testable  # noqa: E402


def build(name):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(weights=None).eval()
        shape = (1, 3, 224, 224)
    elif name == "encoder":
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
        model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
        shape = (1, 16, 64)
    else:
        raise SystemExit(f"unknown model {name!r} (resnet18, encoder)")
    make_testable(model, lambda: torch.randn(4, *shape[1:], generator=gen))
    return model, torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def median_seconds(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def check(name, cache, threads, runs):
    model, x = build(name)
    with torch.no_grad():
        expected = model(x)
    start = time.monotonic()
    cold = korch.compile(model, (x,), cost="measured", cache=cache, threads=threads)
    cold_s = time.monotonic() - start
    got = cold(x)
    err = (got.double() - expected.double()).abs()
    bound = 1e-3 + 1e-3 * expected.double().abs()
    start = time.monotonic()
    warm = korch.compile(model, (x,), cost="measured", cache=cache, threads=threads)
    warm_s = time.monotonic() - start
    start = time.monotonic()
    loaded = korch.load(warm.path)
    load_s = time.monotonic() - start
    warm_err = float((warm(x).double() - expected.double()).abs().max())
    loaded_err = float(abs(loaded(x.numpy()).astype("float64") - expected.double().numpy()).max())
    with torch.no_grad():
        torch_s = median_seconds(lambda: model(x), runs)
    korch_s = median_seconds(lambda: cold(x), runs)
    result = {
        "model": name,
        "input": list(x.shape),
        "threads": threads,
        "kernels": cold.plan.kernels,
        "fallback_kernels": cold.session.num_fallback_kernels,
        "max_abs_error": float(err.max()),
        "max_abs_expected": float(expected.abs().max()),
        "within_tolerance": bool((err <= bound).all()),
        "warm_max_abs_error": warm_err,
        "loaded_max_abs_error": loaded_err,
        "cold_compile_s": round(cold_s, 2),
        "warm_compile_s": round(warm_s, 2),
        "warm_from_cache": warm.from_cache,
        "load_s": round(load_s, 2),
        "korch_run_ms": round(korch_s * 1e3, 3),
        "torch_run_ms": round(torch_s * 1e3, 3),
        "plan_note": cold.plan.note,
    }
    print(json.dumps(result), flush=True)
    return result["within_tolerance"] and warm.from_cache and warm_err <= float(err.max()) + 1e-6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="cache folder (default: a fresh temporary one)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default="resnet18,encoder")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="korch-compile-bench-") as tmp:
        cache = args.cache or tmp
        ok = [check(name, cache, args.threads, args.runs) for name in args.models.split(",")]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
