#!/usr/bin/env python3
"""korch's linear kernels and ONNX Runtime's on the same single-operator models, against the FMA peak.

Runs `korch_linear_limits --json` (every korch implementation of each ViT-B/16, BERT-base and
ResNet-50 GEMM / convolution shape, its GFLOP/s and % of this CPU's measured FMA peak), builds the
same operator as a one-node ONNX model from the shapes that JSON lists (MatMul + Add with constant
weight and bias, the attention's MatMul of two inputs, Conv with bias, softmax attention as MatMul, Mul,
Softmax, MatMul), times ONNX Runtime on it at the same thread count, and writes a markdown table.

ONNX Runtime: CPU execution provider, intra_op_num_threads = T, inter_op_num_threads = 1,
ORT_SEQUENTIAL, ORT_ENABLE_ALL; its output is checked against numpy's once. Timing as korch's:
R rounds of one block of runs each (as many runs as take ~2 ms, at least one), warm caches, the
median over rounds of a block's mean time per run.

    .venv/bin/python bench/linear_limits.py [--threads 2] [--rounds 31] [--only TEXT] [-o FILE.md]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 17


def onnx_model(shape, seed=2):
    """The single-operator ONNX model of one shape of korch_linear_limits' JSON, and its inputs."""
    rng = np.random.default_rng(seed)

    def uniform(dims):
        return rng.uniform(-1.0, 1.0, size=dims).astype(np.float32)

    op, x_dims, w_dims, out_dims = shape["op"], shape["input"], shape["weight"], shape["output"]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)
    feeds = {"x": uniform(x_dims)}
    if op == "MatMul":
        other = helper.make_tensor_value_info("w", TensorProto.FLOAT, w_dims)
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "linear", [x, other], [y])
        feeds["w"] = uniform(w_dims)
    elif op == "MatMul+Add":
        inits = [numpy_helper.from_array(uniform(w_dims), "w"), numpy_helper.from_array(uniform([w_dims[-1]]), "b")]
        nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])]
        graph = helper.make_graph(nodes, "linear", [x], [y], initializer=inits)
    elif op == "Conv":
        inits = [numpy_helper.from_array(uniform(w_dims), "w"), numpy_helper.from_array(uniform([w_dims[0]]), "b")]
        s, p = shape["stride"], shape["pad"]
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=w_dims[2:], strides=[s, s], pads=[p] * 4)
        graph = helper.make_graph([node], "linear", [x], [y], initializer=inits)
    elif op == "Attention":  # softmax(x kt / sqrt(D)) v, x [H, M, D], kt [H, D, N], v [H, N, D]
        h, n, d = w_dims
        kt = helper.make_tensor_value_info("kt", TensorProto.FLOAT, [h, d, n])
        v = helper.make_tensor_value_info("v", TensorProto.FLOAT, w_dims)
        inits = [numpy_helper.from_array(np.array(1.0 / np.sqrt(d), dtype=np.float32), "scale")]
        nodes = [
            helper.make_node("MatMul", ["x", "kt"], ["s"]),
            helper.make_node("Mul", ["s", "scale"], ["scaled"]),
            helper.make_node("Softmax", ["scaled"], ["p"], axis=-1),
            helper.make_node("MatMul", ["p", "v"], ["y"]),
        ]
        graph = helper.make_graph(nodes, "attention", [x, kt, v], [y], initializer=inits)
        feeds["kt"], feeds["v"] = uniform([h, d, n]), uniform(w_dims)
    else:
        raise SystemExit(f"error: unknown operator '{op}' in korch_linear_limits' JSON")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, feeds


def numpy_reference(shape, model, feeds):
    """The operator's output computed by numpy (float64), to check ONNX Runtime's once."""
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    x = feeds["x"].astype(np.float64)
    if shape["op"] == "MatMul":
        return x @ feeds["w"].astype(np.float64)
    if shape["op"] == "MatMul+Add":
        return x @ inits["w"] + inits["b"]
    if shape["op"] == "Attention":
        scores = x @ feeds["kt"].astype(np.float64) * inits["scale"]
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ feeds["v"].astype(np.float64)
    w, s, p = inits["w"], shape["stride"], shape["pad"]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    n, o, oh, ow = shape["output"]
    kh, kw = w.shape[2:]
    y = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i : i + s * oh : s, j : j + s * ow : s]  # n, c, oh, ow
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y + inits["b"].reshape(1, -1, 1, 1)


def time_ort(model, feeds, threads, rounds):
    """Median seconds per run: rounds of one ~2 ms block of runs each (korch_linear_limits' timing)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out = sess.run(None, feeds)[0]  # warm-up
    t0 = time.perf_counter()
    sess.run(None, feeds)
    runs = int(min(1000, max(1, 2e-3 / (time.perf_counter() - t0))))
    per_run = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(runs):
            sess.run(None, feeds)
        per_run.append((time.perf_counter() - t0) / runs)
    return statistics.median(per_run), out


def gflops_cell(gflops, peak):
    return f"{gflops:.1f} ({100.0 * gflops / peak:.0f}%)"


def markdown(korch, ort_results):
    peak = korch["peak"]
    lines = [
        f"FMA peak: {peak['formula']} (clock measured with dependent integer adds; FMA units "
        + (
            f"{peak['known_fma_units']} from the CPU model, {peak['cpu']}"
            if peak["known_fma_units"]
            else f"measured ({peak['measured_fmas_per_cycle']:.2f} per cycle per core), {peak['cpu']}"
        )
        + ").",
        "",
        f"{korch['threads']} threads each; warm caches; {korch['rounds']} rounds of one ~2 ms block of runs per "
        "implementation, median of the blocks' time per run. GFLOP/s = 2 x multiply-adds / time (bias not "
        f"counted). korch: every schedule variant of korch's CPU backend, each verified against the reference "
        f"executor; ONNX Runtime {ort.__version__}: intra_op_num_threads={korch['threads']}, inter_op 1, "
        "sequential, ORT_ENABLE_ALL, output checked against numpy. korch/ORT > 1: korch's best is faster.",
        "",
        "| shape | GFLOP | korch implementations: GFLOP/s (% of peak) | best korch | ONNX Runtime | korch/ORT |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for shape in korch["shapes"]:
        impls = shape["implementations"]
        cells = "<br>".join(f"{gflops_cell(i['gflops'], peak['gflops'])} {i['implementation']}" for i in impls)
        best = max((i["gflops"] for i in impls), default=None)
        o = ort_results[shape["name"]]
        lines.append(
            f"| {shape['name']} ({shape['op']}, {shape['dims']}) | {shape['flops'] / 1e9:.3f} | {cells or 'none'} | "
            + (gflops_cell(best, peak["gflops"]) if best else "none")
            + f" | {gflops_cell(o['gflops'], peak['gflops'])} | "
            + (f"{best / o['gflops']:.2f}x" if best else "")
            + " |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "korch_linear_limits"), help="korch_linear_limits")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--only", default="", help="only the shapes whose name contains TEXT")
    ap.add_argument("-o", "--output", help="write the markdown table here (default: stdout)")
    ap.add_argument("--json", help="also write korch's and ONNX Runtime's figures as JSON")
    args = ap.parse_args()
    if args.threads < 1 or args.rounds < 1:
        raise SystemExit("error: --threads and --rounds must be positive")
    if not os.access(args.bench, os.X_OK):
        raise SystemExit(f"error: {args.bench} not found; build it with `ninja -C build korch_linear_limits`")
    with tempfile.TemporaryDirectory() as tmp:
        korch_json = os.path.join(tmp, "korch.json")
        cmd = [args.bench, "--threads", str(args.threads), "--rounds", str(args.rounds), "--json", korch_json]
        if args.only:
            cmd += ["--only", args.only]
        # korch's own report goes to stderr, so that stdout holds only the table.
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        with open(korch_json) as f:
            korch = json.load(f)
    ort_results = {}
    for shape in korch["shapes"]:
        model, feeds = onnx_model(shape)
        seconds, out = time_ort(model, feeds, args.threads, args.rounds)
        want = numpy_reference(shape, model, feeds)
        if not np.allclose(out, want, rtol=1e-3, atol=1e-3):
            raise SystemExit(f"error: ONNX Runtime's output for {shape['name']} differs from numpy's "
                             f"(max abs {np.max(np.abs(out - want)):.3g})")
        gflops = shape["flops"] / seconds / 1e9
        ort_results[shape["name"]] = {"median_ms": seconds * 1e3, "gflops": gflops,
                                      "percent_of_peak": 100.0 * gflops / korch["peak"]["gflops"]}
        print(f"ONNX Runtime {shape['name']}: {seconds * 1e3:.3f} ms, {gflops:.1f} GFLOP/s", file=sys.stderr)
    table = markdown(korch, ort_results)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            f.write(table)
    else:
        sys.stdout.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"korch": korch, "onnxruntime": {"version": ort.__version__, "shapes": ort_results}}, f, indent=2)


if __name__ == "__main__":
    main()
