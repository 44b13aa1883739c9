#!/usr/bin/env python3
"""Runs ONNX's node test suite (the PyPI onnx's cases) through korch and through ONNX Runtime.

Usage: run_pypi_node_suite.py KORCH_BINARY CASES_DIR [--expected-failures FILE] [--jobs N]
                              [--no-ort] [--write-expected FILE] [--cpu]

Each case (CASES_DIR/test_*/, see generate_pypi_node_cases.py) goes through
`korch check --backend reference` (tolerance |a-b| <= 1e-4 + 1e-3|b|) and is
  passed  - korch computes every output within tolerance,
  refused - korch declines the model with an error (unsupported operator, version, dtype...),
  wrong   - korch runs it and an output is off, or korch crashes or times out.
ONNX Runtime runs the same cases with the same tolerance. Prints
  "korch passed X / refused Y / wrong Z of N; ORT passed W".
Exit status 0 when Z == 0, every refused case is on the expected-failures list (`case_name  # reason`
per line) and no listed case passes (a listed case that passes is reported: take it off the list).
--write-expected writes the list of today's refusals with korch's error as the reason (for review).
--cpu: instead, the float cases korch passes on the reference executor (those not on the
expected-failures list whose model inputs and outputs are all float32) run on the CPU backend,
`korch check --backend cpu --cost analytic --time-limit 5` (generated Halide and oneDNN kernels, the
reference only where the backend generates none): prints
  "cpu backend: passed X / wrong Z of N float cases"
and exits 0 when Z == 0. ORT is not run.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

from case_lists import read_list  # this script's folder is on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
ATOL, RTOL = 1e-4, 1e-3


def short_reason(output):
    """korch's first error line, without the node name and the list of supported operators."""
    for line in output.splitlines():
        if line.startswith("error:"):
            msg = line[len("error:"):].strip()
            msg = re.sub(r"; supported operators:.*", "", msg)
            msg = re.sub(r"tensor file '[^']*'", "a tensor file", msg)
            msg = re.sub(r" \(supported: [^)]*\)?", "", msg)
            if re.search(r"has 0 values, expected|is too large: \[|element type UNDEFINED", msg):
                msg = "sequence- or optional-typed value; korch handles tensors only"
            msg = re.sub(r"^node '[^']*'(: | \(([A-Za-z]+)\): )", lambda m: (m.group(2) + ": ") if m.group(2) else "", msg)
            return msg[:160]
    return output.strip().splitlines()[-1][:160] if output.strip() else "no output"


def run_korch(korch, case_dir, timeout, backend="reference"):
    cmd = [korch, "check", case_dir, "--backend", backend, "--threads", "1"]
    if backend == "cpu":
        cmd += ["--cost", "analytic", "--time-limit", "5"]  # the plan may be any; its outputs are checked
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "wrong", "timeout"
    out = r.stdout + r.stderr
    if r.returncode == 0 and re.search(r"^PASS$", r.stdout, re.M):
        return "passed", ""
    if r.returncode < 0:
        return "wrong", f"crashed (signal {-r.returncode})"
    if re.search(r"\bFAIL\b", r.stdout):
        lines = [l.strip() for l in r.stdout.splitlines() if "FAIL" in l]
        return "wrong", lines[0][:200]
    return "refused", short_reason(out)


def all_float32(case_dir):
    """Whether every input and output of the case's model is a float32 tensor."""
    import onnx
    graph = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False).graph
    values = list(graph.input) + list(graph.output)
    return bool(values) and all(v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
                                for v in values)


def run_cpu_backend(args, names, dirs, expected):
    """The float cases the reference passes, on the CPU backend; 0 when none is wrong."""
    cases = [(n, d) for n, d in zip(names, dirs) if n not in expected and all_float32(d)]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lambda c: run_korch(args.korch, c[1], args.timeout, "cpu"), cases))
    wrong = [(n, why) for (n, _), (status, why) in zip(cases, results) if status != "passed"]
    for n, why in wrong:
        print(f"WRONG on the CPU backend {n}: {why or 'failed'}")
    print(f"cpu backend: passed {len(cases) - len(wrong)} / wrong {len(wrong)} of {len(cases)} float cases")
    return 0 if not wrong else 1


# ---- ONNX Runtime, in a child process (a crash in ORT costs one case, not the run) ----

def load_value(path, value_info):
    import onnx
    from onnx import numpy_helper
    data = open(path, "rb").read()
    t = value_info.type
    if t.HasField("sequence_type"):
        p = onnx.SequenceProto()
        p.ParseFromString(data)
        return numpy_helper.to_list(p)
    if t.HasField("optional_type"):
        p = onnx.OptionalProto()
        p.ParseFromString(data)
        return numpy_helper.to_optional(p)
    if t.HasField("map_type"):
        p = onnx.MapProto()
        p.ParseFromString(data)
        return numpy_helper.to_dict(p)
    p = onnx.TensorProto()
    p.ParseFromString(data)
    return numpy_helper.to_array(p)


def close(a, b):
    import numpy as np
    if isinstance(b, list):
        return isinstance(a, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if b is None:
        return a is None
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if b.dtype.kind in "fc" or a.dtype.kind in "fc":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        nan = np.isnan(b64)
        if not np.array_equal(np.isnan(a64), nan):
            return False
        a64, b64 = a64[~nan], b64[~nan]
        same = a64 == b64  # infinities
        return bool(np.all(same | (np.abs(a64 - b64) <= ATOL + RTOL * np.abs(b64))))
    return bool(np.array_equal(a, b))


def ort_case(case_dir):
    import onnx
    import onnxruntime as ort
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    sets = sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_"))
    for s in sets:
        ds = os.path.join(case_dir, s)
        feeds = {}
        for j, vi in enumerate(model.graph.input):
            p = os.path.join(ds, f"input_{j}.pb")
            if os.path.exists(p):
                feeds[vi.name] = load_value(p, vi)
        got = sess.run(None, feeds)
        for j, vi in enumerate(model.graph.output):
            p = os.path.join(ds, f"output_{j}.pb")
            if os.path.exists(p) and not close(got[j], load_value(p, vi)):
                return False
    return True


def ort_worker(case_dirs):
    import warnings
    warnings.simplefilter("ignore")
    for d in case_dirs:
        try:
            ok = ort_case(d)
        except Exception:
            ok = False
        print(("ok " if ok else "no ") + d, flush=True)


def run_ort(case_dirs, jobs):
    """{case_dir: bool}, from child processes; a case during which ORT crashed counts as failed."""
    results = {}

    def chunk_runner(chunk):
        local = {}
        pending = list(chunk)
        while pending:
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--ort-worker"] + pending,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            for line in p.stdout:
                status, d = line.rstrip("\n").split(" ", 1)
                local[d] = status == "ok"
            p.wait()
            pending = [d for d in pending if d not in local]
            if pending:  # the first pending case crashed ORT
                local[pending[0]] = False
                pending = pending[1:]
        return local

    chunks = [case_dirs[i::jobs] for i in range(jobs)]
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for part in ex.map(chunk_runner, chunks):
            results.update(part)
    return results


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--ort-worker":
        ort_worker(sys.argv[2:])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("korch")
    ap.add_argument("cases")
    ap.add_argument("--expected-failures", default=os.path.join(HERE, "pypi_expected_failures.txt"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--write-expected", help="write today's refusals and failures, with reasons, to this file")
    ap.add_argument("--cpu", action="store_true", help="run the float cases korch passes on the CPU backend")
    args = ap.parse_args()

    names = sorted(d for d in os.listdir(args.cases)
                   if d.startswith("test_") and os.path.exists(os.path.join(args.cases, d, "model.onnx")))
    dirs = [os.path.join(args.cases, n) for n in names]
    expected = read_list(args.expected_failures) if os.path.exists(args.expected_failures) else {}
    if args.cpu:
        return run_cpu_backend(args, names, dirs, expected)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        korch = dict(zip(names, ex.map(lambda d: run_korch(args.korch, d, args.timeout), dirs)))
    ort = {} if args.no_ort else run_ort(dirs, args.jobs)

    passed = [n for n in names if korch[n][0] == "passed"]
    refused = [n for n in names if korch[n][0] == "refused"]
    wrong = [n for n in names if korch[n][0] == "wrong"]
    ort_passed = sum(1 for d in dirs if ort.get(d))

    if args.write_expected:
        with open(args.write_expected, "w") as f:
            f.write("# PyPI onnx node cases korch does not pass (run_pypi_node_suite.py): case  # reason\n")
            width = max(len(n) for n in refused + wrong) if refused + wrong else 0
            for n in refused + wrong:
                f.write(f"{n.ljust(width)}  # {korch[n][1]}\n")

    problems = []
    for n, reason in expected.items():
        if not reason:
            problems.append(f"{args.expected_failures}: '{n}' has no reason")
    for n in wrong:
        problems.append(f"WRONG {n}: {korch[n][1]}")
    for n in refused:
        if n not in expected:
            problems.append(f"REFUSED (not on the expected-failures list) {n}: {korch[n][1]}")
    unexpected_passes = [n for n in passed if n in expected]
    for n in unexpected_passes:
        problems.append(f"PASSES but listed as an expected failure (take it off the list): {n}")
    for n in expected:
        if n not in korch:
            print(f"note: expected failure '{n}' is not among the generated cases")
    ort_only = [n for n, d in zip(names, dirs) if ort.get(d) and korch[n][0] != "passed"]
    for line in problems:
        print(line)
    if ort_only:
        print(f"note: {len(ort_only)} cases pass on ORT but not on korch")
    ort_text = "n/a" if args.no_ort else str(ort_passed)
    print(f"korch passed {len(passed)} / refused {len(refused)} / wrong {len(wrong)} of {len(names)}; "
          f"ORT passed {ort_text}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
