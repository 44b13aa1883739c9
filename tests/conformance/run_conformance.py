#!/usr/bin/python3
"""Runs ONNX's node conformance cases through `korch check --backend reference`.

Usage: run_conformance.py KORCH_BINARY CASES_DIR [--ops ops.txt] [--expected-failures FILE]

A case (CASES_DIR/test_*/) is in scope when every operator of its model appears in ops.txt.
Each in-scope case must pass, except those listed in the expected-failures file (one case per
line, then '#' and a one-line reason). A listed case that passes is also an error, so the
list stays honest. Prints one line per failure and a closing 'N passed, N failed, N skipped'.
"""
import argparse
import os
import subprocess
import sys

import onnx

from case_lists import read_list  # this script's folder is on sys.path


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("korch")
    ap.add_argument("cases")
    ap.add_argument("--ops", default=os.path.join(here, "ops.txt"))
    ap.add_argument("--expected-failures", default=os.path.join(here, "expected_failures.txt"))
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--all", action="store_true", help="every case is in scope (no operator filter)")
    args = ap.parse_args()

    ops = set(read_list(args.ops))
    expected = read_list(args.expected_failures) if args.expected_failures else {}
    for name, reason in expected.items():
        if not reason:
            print(f"expected_failures.txt: '{name}' has no reason")
            return 1

    passed = failed = skipped = 0
    out_of_scope = 0
    failures = []
    for name in sorted(os.listdir(args.cases)):
        model_path = os.path.join(args.cases, name, "model.onnx")
        if not os.path.exists(model_path):
            continue
        model = onnx.load(model_path, load_external_data=False)
        if not args.all and not all(n.op_type in ops for n in model.graph.node):
            out_of_scope += 1
            continue
        try:
            r = subprocess.run([args.korch, "check", os.path.join(args.cases, name), "--backend", "reference"],
                               capture_output=True, text=True, timeout=args.timeout)
            ok, output = r.returncode == 0, (r.stdout + r.stderr)
        except subprocess.TimeoutExpired:
            ok, output = False, "timeout"
        if name in expected:
            if ok:
                failures.append(f"{name}: listed as an expected failure but passes; remove it from the list")
                failed += 1
            else:
                skipped += 1
            continue
        if ok:
            passed += 1
        else:
            failed += 1
            lines = [l for l in output.splitlines() if "error" in l or "FAIL" in l]
            failures.append(f"{name}: {' | '.join(lines[:2]) or output[-300:]}")
    for line in failures:
        print("FAILED", line)
    for name in expected:
        if not os.path.isdir(os.path.join(args.cases, name)):
            print(f"note: expected failure '{name}' is not among the generated cases")
    print(f"conformance: {out_of_scope} cases out of scope (operators korch does not list)")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
