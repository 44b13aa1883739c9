#!/usr/bin/env python3
"""korch vs ONNX Runtime, OpenVINO and PyTorch (eager, torch.compile) on the Korch paper's models and more.

Usage (normally through bench/run.sh, which installs what is missing first):

    python3 bench/run_benchmarks.py [--quick] [--models a,b] [--threads 2] [--rounds 20]
        [--cases DIR] [--work DIR] [--out-dir DIR] [--korch build/korch] [--merge]
    python3 bench/run_benchmarks.py --render-only [--out-dir DIR]   # docs from the JSON again

For every model (export_paper_models.py's seven, and ViT-B/16, MobileNetV3-large, ConvNeXt-T,
EfficientNet-B0 and a BERT-sized TransformerEncoder from models/export_torchvision.py; --quick:
their tiny variants), at one intra-op thread count T for every engine:

 1. korch's optimisation cost: `korch optimize --cost measured` with a fresh profile cache
    (cold), then again with the same cache (warm); candidates / measured kernels / dropped /
    solver time are read from the summary it writes with --json.
 2. engines, each a persistent peer process that runs the model once per line on its stdin
    and prints the elapsed milliseconds (timed inside the peer, pipe latency excluded):
    korch (the optimal plan), korch-greedy (korch's greedy-fusion plan, DIR/greedy.json),
    ONNX Runtime (CPU EP), OpenVINO (CPU plugin, f32, LATENCY hint, INFERENCE_NUM_THREADS = T),
    PyTorch eager, torch.compile (inductor, CPU), and for the models of
    --export-models korch-export (the same korch plan as a `korch export` package, driven by
    examples/c_consumer --serve).
 3. warm-up runs, then R interleaved rounds (every engine runs --block times in a row per round,
    a busy-waited --gap-ms after each block); median and p10/p90. R is lowered for slow models so that the timed
    rounds of one model take about --round-budget-s seconds.
 4. output check: korch's outputs (`korch run --output`) against ORT's and PyTorch's, ORT's
    against PyTorch's: pass if |a-b| <= 1e-3 + 1e-3|b| elementwise (ONNX Runtime's own
    tolerance for whole-model tests); and every engine against the model evaluated in float64
    by PyTorch (the eager peer computes it once), the truth the fp32 engines approximate.

Writes OUT/benchmarks.json, OUT/benchmarks.md and OUT/benchmarks.png (OUT: docs/, or
build/bench/quick/ with --quick). Every number in the Markdown comes from the JSON.

--device cuda runs the same comparison on an NVIDIA GPU (scripts/gpu_check.sh drives it there):
korch with `--backend cuda`, PyTorch eager and torch.compile with the model and its inputs on the
GPU (fp32, TF32 off on both sides unless --tf32), every engine's timed run including the copy of
the inputs to the device and of the outputs back; ONNX Runtime (a CPU engine here) and the
exported package (CPU only) are left out. --optimize-budget bounds korch's profiling there.

The same file is also the Python engines' peer program:
    run_benchmarks.py --peer ort|openvino|eager|compile --case-dir D --model NAME [--tiny] --threads T
        [--device cuda] [--tf32]
"""
import argparse
import datetime
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORTER = os.path.join(REPO, "models", "paper", "export_paper_models.py")
TORCHVISION_EXPORTER = os.path.join(REPO, "models", "export_torchvision.py")
PAPER_MODELS = ["candy", "segformer_b0", "efficientvit_b1", "yolox_nano", "yolov4", "bert_base", "resnet50"]
# Models beyond the paper's, exported by models/export_torchvision.py (random weights, nothing downloaded):
# model -> (its NAME there and options at full size, the same for --quick: the same op mix, small).
# transformer_encoder is BERT-sized: BERT-base's widths (768, 12 heads, FFN 3072, 128 tokens), 2 layers.
TORCHVISION_MODELS = {
    "vit_b_16": (("vit_b_16", []), ("tiny_vit", ["--size", "32"])),
    "vit_b_16_384": (("vit_b_16", ["--size", "384"]), ("tiny_vit", ["--size", "64"])),
    "mobilenet_v3_large": (("mobilenet_v3_large", []), ("mobilenet_v3_large", ["--size", "32"])),
    "convnext_tiny": (("convnext_tiny", []), ("convnext_tiny", ["--size", "32"])),
    "efficientnet_b0": (("efficientnet_b0", []), ("efficientnet_b0", ["--size", "32"])),
    "transformer_encoder": (
        ("transformer_encoder", ["--layers", "2", "--d-model", "768", "--heads", "12", "--ff", "3072", "--seq", "128"]),
        ("transformer_encoder", ["--layers", "1", "--d-model", "64", "--heads", "4", "--ff", "128", "--seq", "16"])),
    # Long-sequence encoders (issue 26): attention's [seq, seq] scores dominate the memory traffic.
    "encoder_1024": (
        ("transformer_encoder", ["--layers", "2", "--d-model", "256", "--heads", "4", "--ff", "1024", "--seq", "1024"]),
        ("transformer_encoder", ["--layers", "1", "--d-model", "64", "--heads", "2", "--ff", "128", "--seq", "256"])),
    "encoder_4096": (
        ("transformer_encoder", ["--layers", "2", "--d-model", "256", "--heads", "4", "--ff", "1024", "--seq", "4096"]),
        ("transformer_encoder", ["--layers", "1", "--d-model", "64", "--heads", "2", "--ff", "128", "--seq", "512"])),
}
ALL_MODELS = PAPER_MODELS + list(TORCHVISION_MODELS)
# The five models of the Korch paper's evaluation (BERT-base and ResNet-50 are extra here).
PAPER_FIVE = ["candy", "segformer_b0", "efficientvit_b1", "yolox_nano", "yolov4"]
ENGINES = ["korch", "korch-greedy", "ort", "openvino", "torch-eager", "torch-compile", "korch-export"]
# The engines korch is compared with, in the report's order.
PEER_ENGINES = ["korch-greedy", "ort", "openvino", "torch-eager", "torch-compile"]
ENGINE_LABEL = {"korch": "korch", "korch-greedy": "korch greedy plan", "ort": "ONNX Runtime", "openvino": "OpenVINO",
                "korch-export": "korch exported library",
                "torch-eager": "PyTorch eager", "torch-compile": "torch.compile"}
PEERS = ["korch", "korch-greedy"]  # peers that are C++ processes; the rest are Python peers
# korch-export: the korch plan exported with `korch export`, built with examples/c_consumer and run
# by its --serve mode (a C process); only for the models of --export-models.
DEFAULT_EXPORT_MODELS = "resnet50,bert_base"
# Whole-model output tolerance: |a - b| <= ATOL + RTOL |b| elementwise. These are ONNX Runtime's
# own defaults for whole-model tests (onnx_test_runner / ModelTest: per-sample 1e-3 absolute and
# 1e-3 relative). `korch check`'s per-kernel default is tighter (1e-4 absolute), but through the
# deep random-weight nets here fp32 summation order alone moves single outputs by more than that:
# ORT and PyTorch disagree with each other, and with float64, beyond 1e-4 on YOLOX and YOLOv4.
ATOL, RTOL = 1e-3, 1e-3
SPEEDUP_TARGET = 1.15
GEOMEAN_VS_ORT_TARGET = 1.3  # issue 25: over every model in the report


def export_argv(name, quick, case_dir, cases_dir):
    """The command that exports a model's case (export_paper_models.py or export_torchvision.py)."""
    if name in TORCHVISION_MODELS:
        tv_name, options = TORCHVISION_MODELS[name][1 if quick else 0]
        return [sys.executable, TORCHVISION_EXPORTER, tv_name, case_dir] + options
    return [sys.executable, EXPORTER, cases_dir, "--only", name] + (["--tiny"] if quick else [])


def build_torch_module(name, tiny, case_inputs):
    """The PyTorch module exactly as the exporter built it (same builder, seed and make_testable
    calibration), so that it has model.onnx's weights: (module, input names, output flattener)."""
    import torch
    sys.path.insert(0, os.path.dirname(EXPORTER))
    import export_paper_models as epm  # noqa: E402
    if name in TORCHVISION_MODELS:
        sys.path.insert(0, os.path.dirname(TORCHVISION_EXPORTER))
        import export_torchvision as etv  # noqa: E402
        tv_name, options = TORCHVISION_MODELS[name][1 if tiny else 0]
        a = etv.parse_args([tv_name, "unused"] + options)
        torch.manual_seed(a.seed)
        model = etv.MODELS[tv_name][0](a).eval()
        cgen = torch.Generator().manual_seed(a.seed + 1)
        etv.make_testable(model, lambda: etv.make_input(a, cgen, batch=4))
        return model.eval(), [case_inputs[0][0]], epm._flatten
    torch.manual_seed(epm.SEED)
    model, make_inputs, in_names, _ = epm.MODELS[name](tiny)
    model.eval()
    cgen = torch.Generator().manual_seed(epm.SEED + 1)
    epm.make_testable(model, lambda: make_inputs(cgen, batch=4 if tiny else 2))
    return model.eval(), in_names, epm._flatten


def log(*a):
    print("[bench %s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


# ==========================================================================================
# Peer mode (Python engines)
# ==========================================================================================
def proc_status_mib(pid, key):
    """A memory figure of a process from /proc/PID/status (VmRSS, VmHWM: peak resident) in MiB, or None."""
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _peer_main(args):
    """Persistent benchmark peer: set up the engine, write its outputs, print `ready {json}`,
    then run once per stdin line and print the elapsed ms; `quit` or EOF ends it."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the libraries print goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    info = {}
    try:
        import numpy as np
        sys.path.insert(0, os.path.join(REPO, "models"))
        from make_case import read_tensor  # noqa: E402
        ds = os.path.join(args.case_dir, "test_data_set_0")
        in_files = sorted((f for f in os.listdir(ds) if f.startswith("input_")),
                          key=lambda f: int(f[6:-3]))
        out_files = sorted((f for f in os.listdir(ds) if f.startswith("output_")),
                           key=lambda f: int(f[7:-3]))
        inputs = [read_tensor(os.path.join(ds, f)) for f in in_files]  # (name, array)
        refs = [read_tensor(os.path.join(ds, f)) for f in out_files]
        T = args.threads
        # before the engine's library is imported: what the process holds besides the model
        info["rss_base_mib"] = proc_status_mib("self", "VmRSS")
        if args.peer == "ort":
            import onnxruntime as rt
            so = rt.SessionOptions()
            so.intra_op_num_threads = T
            so.inter_op_num_threads = 1
            so.execution_mode = rt.ExecutionMode.ORT_SEQUENTIAL
            so.graph_optimization_level = rt.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.add_session_config_entry("session.intra_op.allow_spinning", "0" if args.passive else "1")
            t0 = time.perf_counter()
            sess = rt.InferenceSession(os.path.join(args.case_dir, "model.onnx"), so,
                                       providers=["CPUExecutionProvider"])
            info["setup_s"] = time.perf_counter() - t0
            feed = {n: a for n, a in inputs}
            out_names = [o.name for o in sess.get_outputs()]

            def run():
                return sess.run(out_names, feed)
            outs = run()
            info["version"] = rt.__version__
        elif args.peer == "openvino":
            import openvino as ov
            core = ov.Core()
            config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": T, "INFERENCE_PRECISION_HINT": "f32"}
            t0 = time.perf_counter()
            compiled = core.compile_model(os.path.join(args.case_dir, "model.onnx"), "CPU", config)
            request = compiled.create_infer_request()
            info["setup_s"] = time.perf_counter() - t0
            info["config"] = {k: str(compiled.get_property(k)) for k in config}
            feed = {n: a for n, a in inputs}

            def run():
                request.infer(feed)
                return [request.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]
            outs = run()
            info["version"] = ov.__version__
        else:
            import torch
            torch.set_num_threads(T)
            cuda = args.device == "cuda"
            if cuda:
                torch.backends.cuda.matmul.allow_tf32 = args.tf32
                torch.backends.cudnn.allow_tf32 = args.tf32
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:
                pass
            import warnings
            warnings.filterwarnings("ignore")
            t0 = time.perf_counter()
            # Rebuild the module exactly as the exporter did, so that the weights are the ones in
            # model.onnx (checked below against the case's reference outputs).
            model, in_names, flatten = build_torch_module(args.model, args.tiny, inputs)
            by_name = dict(inputs)
            tin = [torch.from_numpy(np.ascontiguousarray(by_name[n])) for n in in_names]
            info["setup_s"] = time.perf_counter() - t0
            if args.peer == "eager" and args.write_outputs:  # on the CPU, before the model moves
                info.update(write_float64_outputs(model, tin, flatten, args.write_outputs))
            if cuda:
                model.to("cuda")
                info["device"] = torch.cuda.get_device_name()
            engine = model if args.peer == "eager" else torch.compile(model)  # inductor, default mode

            def run():
                # inputs from the host and outputs back to it, as `korch run --serve` does
                with torch.inference_mode() if args.peer == "eager" else torch.no_grad():
                    outs = flatten(engine(*[t.to("cuda") for t in tin] if cuda else tin))
                    return [o.detach().cpu().numpy() for o in outs]
            t0 = time.perf_counter()
            outs = run()
            info["first_run_s"] = time.perf_counter() - t0
            if args.peer == "compile":
                info["compile_s"] = info["first_run_s"]  # the first call compiles
            info["version"] = torch.__version__
            info["threads"] = torch.get_num_threads()
        outs = [np.asarray(o) for o in outs]
        # agreement with the reference outputs stored in the case (PyTorch at export time)
        info["vs_case_reference"] = [compare(o, r)[1] for o, (_, r) in zip(outs, refs)]
        if args.write_outputs:
            os.makedirs(args.write_outputs, exist_ok=True)
            for i, o in enumerate(outs):
                np.save(os.path.join(args.write_outputs, "output_%d.npy" % i), o)
    except BaseException as e:  # noqa: B902  report any setup failure on the protocol
        traceback.print_exc()
        msg = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:300])
        proto.write("failed " + msg + "\n")
        proto.flush()
        return 1
    proto.write("ready " + json.dumps(info) + "\n")
    proto.flush()
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        t0 = time.perf_counter()
        run()
        proto.write("%.6f\n" % ((time.perf_counter() - t0) * 1e3))
        proto.flush()
    return 0


# ==========================================================================================
# Output comparison
# ==========================================================================================
def write_float64_outputs(model, tin, flatten, out_dir):
    """The model evaluated in float64 (a copy of its weights, float inputs widened), written as
    output_fp64_K.npy: the reference that every fp32 engine's error is measured against."""
    import copy
    import numpy as np
    import torch
    t0 = time.perf_counter()
    try:
        m64 = copy.deepcopy(model).double()
        t64 = [t.double() if t.is_floating_point() else t for t in tin]
        with torch.inference_mode():
            outs = [o.double().numpy() for o in flatten(m64(*t64))]
    except Exception as e:  # noqa: B902  a model that cannot run in float64 only loses this check
        return {"fp64_error": "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:200])}
    os.makedirs(out_dir, exist_ok=True)
    for i, o in enumerate(outs):
        np.save(os.path.join(out_dir, "output_fp64_%d.npy" % i), o)
    return {"fp64_s": round(time.perf_counter() - t0, 2)}


def compare(a, b, atol=ATOL, rtol=RTOL):
    """Compare actual a with expected b: (pass, {max_abs, max_rel, worst_ratio, ...})."""
    import numpy as np
    a = np.asarray(a)
    b = np.asarray(b)
    res = {"shape": list(b.shape)}
    if a.shape != b.shape:
        if a.size == b.size:
            a = a.reshape(b.shape)
        else:
            res["error"] = "shape %s vs %s" % (list(a.shape), list(b.shape))
            res["pass"] = False
            return False, res
    if b.dtype.kind in "iub" or a.dtype.kind in "iub":
        ok = bool(np.array_equal(a.astype(np.int64), b.astype(np.int64)))
        d = np.abs(a.astype(np.int64) - b.astype(np.int64))
        res.update(max_abs=float(d.max()) if d.size else 0.0, max_rel=0.0, pass_=ok)
        res["pass"] = res.pop("pass_")
        return ok, res
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    nan_ok = np.array_equal(np.isnan(a), np.isnan(b))
    inf_ok = np.array_equal(np.where(np.isinf(b), b, 0), np.where(np.isinf(a), a, 0))
    fin = np.isfinite(a) & np.isfinite(b)
    d = np.abs(a - b)[fin]
    bb = np.abs(b)[fin]
    max_abs = float(d.max()) if d.size else 0.0
    mean_abs = float(d.mean()) if d.size else 0.0
    nz = bb != 0
    max_rel = float((d[nz] / bb[nz]).max()) if nz.any() else 0.0
    ratio = float((d / (atol + rtol * bb)).max()) if d.size else 0.0
    ok = bool(nan_ok and inf_ok and ratio <= 1.0)
    res.update(max_abs=max_abs, mean_abs=mean_abs, max_rel=max_rel, worst_tol_ratio=ratio, pass_=ok,
               ref_max_abs=float(bb.max()) if bb.size else 0.0)
    res["pass"] = res.pop("pass_")
    return ok, res


def compare_sets(actual, expected, names):
    outs = []
    ok = True
    if len(actual) != len(expected):
        return {"pass": False, "error": "%d outputs vs %d" % (len(actual), len(expected))}
    for n, a, b in zip(names, actual, expected):
        o, r = compare(a, b)
        r["output"] = n
        outs.append(r)
        ok = ok and o
    return {"pass": ok, "max_abs": max((r.get("max_abs", float("inf")) for r in outs), default=0.0),
            "max_rel": max((r.get("max_rel", float("inf")) for r in outs), default=0.0),
            "mean_abs": max((r.get("mean_abs", float("inf")) for r in outs), default=0.0),
            "worst_tol_ratio": max((r.get("worst_tol_ratio", float("inf")) for r in outs), default=0.0),
            "outputs": outs}


# ==========================================================================================
# Subprocess helpers
# ==========================================================================================
class PeerError(RuntimeError):
    pass


def _tail(path, n=6):
    try:
        with open(path, errors="replace") as f:
            lines = [l.rstrip() for l in f.read().splitlines() if l.strip()]
        return " | ".join(lines[-n:])
    except OSError:
        return ""


class Peer:
    """A persistent benchmark peer: `ready ...` once, then one run per stdin line, one ms per
    stdout line. Non-numeric stdout lines are ignored (kept in the log)."""

    def __init__(self, engine, argv, env, log_path, start_timeout):
        self.engine = engine
        self.log_path = log_path
        self.logf = open(log_path, "w")
        self.logf.write("$ %s\n" % " ".join(argv))
        self.logf.flush()
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.logf, env=env, cwd=REPO, start_new_session=True)
        self.buf = b""
        self.info = {}
        self.peak_rss_mib = None
        while True:
            line = self._readline(start_timeout - (time.perf_counter() - t0), "start")
            if line.startswith("ready"):
                rest = line[5:].strip()
                if rest.startswith("{"):
                    self.info = json.loads(rest)
                else:
                    self.info = {"ready": rest}
                break
            if line.startswith("failed"):
                self.close()
                raise PeerError(line[6:].strip())
            self.logf.write("[stdout] %s\n" % line)
        self.start_s = time.perf_counter() - t0

    def _readline(self, timeout, what):
        deadline = time.perf_counter() + max(timeout, 0.1)
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.perf_counter()
            if left <= 0:
                self.kill()
                raise PeerError("timeout (%.0f s) during %s" % (timeout, what))
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                rc = self.proc.wait()
                raise PeerError("exited with status %s during %s: %s" % (rc, what, _tail(self.log_path)))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace").strip()

    def run_once(self, timeout):
        try:
            self.proc.stdin.write(b"r\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            rc = self.proc.wait()
            raise PeerError("exited with status %s: %s" % (rc, _tail(self.log_path)))
        while True:
            line = self._readline(timeout, "a run")
            try:
                return float(line)
            except ValueError:
                self.logf.write("[stdout] %s\n" % line)

    def pids(self):
        return [self.proc.pid] if self.proc.poll() is None else []

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait()

    def close(self):
        if self.proc.poll() is None:
            self.peak_rss_mib = proc_status_mib(self.proc.pid, "VmHWM")
            try:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.logf.close()


def run_cmd(argv, timeout, env=None, log_path=None):
    """Run argv with a timeout: (rc, stdout, stderr, seconds); rc None on timeout."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO,
                           errors="replace")
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = None
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    secs = time.perf_counter() - t0
    if log_path:
        with open(log_path, "w") as f:
            f.write("$ %s\n(rc %s, %.1f s)\n--- stdout\n%s\n--- stderr\n%s\n" % (" ".join(argv), rc, secs, out, err))
    return rc, out, err, secs


def first_error(out, err, rc, timeout):
    if rc is None:
        return "timed out after %.0f s" % timeout
    for text in (err, out):
        for l in text.splitlines():
            if l.startswith("error:"):
                return l.strip()
    lines = [l for l in (err + "\n" + out).splitlines() if l.strip()]
    return "exit status %s: %s" % (rc, lines[-1].strip() if lines else "(no output)")


# ------------------------------------------------------------------------------------------
# CPU accounting: how much CPU did processes other than the benchmark use while it timed?
# ------------------------------------------------------------------------------------------
CLK = os.sysconf("SC_CLK_TCK")


def _busy_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v[:8]) - idle


def _proc_jiffies(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, ValueError, IndexError):
        return 0


def _tree_jiffies(pids):
    """CPU time of pids and their descendants (threads included)."""
    total = 0
    seen = set()
    todo = list(pids)
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    s = f.read()
                ppid = int(s[s.rindex(")") + 2:].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _proc_jiffies(p)
        todo += children.get(p, [])
    return total


class CpuWindow:
    def __init__(self, pids):
        self.pids = list(pids) + [os.getpid()]
        self.t0 = time.perf_counter()
        self.busy0 = _busy_jiffies()
        self.own0 = _tree_jiffies(self.pids)

    def stop(self):
        wall = time.perf_counter() - self.t0
        busy = _busy_jiffies() - self.busy0
        own = _tree_jiffies(self.pids) - self.own0
        return {"wall_s": round(wall, 2),
                "own_cores": round(own / CLK / max(wall, 1e-9), 2),
                "foreign_cores": round(max(busy - own, 0) / CLK / max(wall, 1e-9), 2)}


# ==========================================================================================
# korch
# ==========================================================================================
def optimize_facts(j):
    """The figures of one `korch optimize --json` file, under the names benchmarks.json uses."""
    p = j["profiling"] or {}
    race = j["plan_race"]
    m = j["machine"]
    r = {"primitives": j["primitives"],
         "partitions": j["partitions"]["total"],
         "partitions_solved": j["partitions"]["solved"],
         "candidates": j["candidates"],
         "priced": j["priced"],
         "solver_s": round(j["solver_seconds"], 2),
         "optimality": "every partition proven optimal" if j["all_optimal"] else "NOT all partitions proven optimal",
         "optimize_s_reported": round(j["total_seconds"], 2),
         "measured": j["measured"],
         "timed_now": p.get("timed_now"),
         "from_cache": p.get("from_cache"),
         "dropped": j["dropped"],
         "mismatches": j["mismatches"],
         "blp_solves": p.get("blp_solves"),
         "profiling_s": round(p["seconds"], 1) if "seconds" in p else None,
         "stored_solutions": p.get("stored_solutions"),
         "machine": "%g GB/s, %g GFLOP/s GEMM, %g Gop/s vector, %g us/kernel (%s)" % (
             m["bandwidth_gbs"], m["gemm_gflops"], m["vector_gops"], m["kernel_overhead_us"], m["source"]),
         "plans": {x["strategy"]: {"kernels": x["kernels"], "predicted_ms": x["predicted_seconds"] * 1e3}
                   for x in j["plans"]},
         "predicted_speedup_vs_greedy": round(j["predicted_speedup_vs_greedy"], 3),
         "not_optimal_partitions": ["partition %d (%d primitives): %s" % (x["index"], x["primitives"], x["status"])
                                    for x in j["not_optimal_partitions"]]}
    if race["raced"]:
        r["plan_race"] = race["note"]
    if race["greedy_kept"]:
        r["blp_kernels"] = race["blp_kernels"]
        r["blp_predicted_ms"] = race["blp_predicted_seconds"] * 1e3
    return {k: v for k, v in r.items() if v is not None}


def parse_profile(out):
    """Kernel rows of `korch run --profile`: index, steady-state median ms, predicted ms, ops, [schedule]."""
    ks = []
    for m in re.finditer(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+\[(.*)\]\s*$", out, re.M):
        ks.append({"index": int(m.group(1)), "ms": float(m.group(2)), "predicted_ms": float(m.group(3)),
                   "ops": m.group(4), "schedule": m.group(5)})
    m = re.search(r"ran (\d+) kernels in ([\d.]+) ms", out)
    return ks, (float(m.group(2)) if m else None)


def korch_device_flags(args):
    """korch's flags for the device measured: its CUDA backend on a GPU."""
    if args.device != "cuda":
        return []
    return ["--backend", "cuda"] + (["--tf32"] if args.tf32 else [])


def korch_env(args):
    """korch's environment: the user's, plus OMP_WAIT_POLICY=PASSIVE under --passive."""
    env = dict(os.environ)
    if args.passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


# ==========================================================================================
# One model
# ==========================================================================================
def busy_wait(seconds):
    """Wait on this CPU, not asleep. If every CPU of the machine idles for more than ~15 ms, waking
    a thread pool again took 10-17 ms in 8-21% of the runs on the 2-vCPU VM this benchmark was
    built on (2 OpenMP threads, 20 ms sleeps; none with sleeps <= 10 ms or with one CPU busy):
    an artifact of the VM, not of the engine measured, that a sleeping gap charged at random to
    whichever multi-threaded engine ran next."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def ensure_case(args, name, case, case_dir, res):
    if os.path.exists(os.path.join(case_dir, "model.onnx")) and \
            os.path.exists(os.path.join(case_dir, "test_data_set_0", "input_0.pb")):
        res["export"] = {"status": "existing"}
        return True
    log(name, ": exporting to", case_dir)
    argv = export_argv(name, args.quick, case_dir, args.cases)
    rc, out, err, secs = run_cmd(argv, args.export_timeout,
                                 log_path=os.path.join(args.work, case, "export.log"))
    if rc != 0 or not os.path.exists(os.path.join(case_dir, "model.onnx")):
        lines = [l for l in (err + "\n" + out).splitlines() if l.strip()]
        msg = "timed out after %d s" % args.export_timeout if rc is None else \
            "exit status %s: %s" % (rc, lines[-1][:300] if lines else "")
        res["export"] = {"status": "failed", "error": msg, "seconds": round(secs, 1)}
        return False
    res["export"] = {"status": "exported", "seconds": round(secs, 1)}
    return True


def build_export(args, korch_bin, work, model, plan, in_paths, korch_outs, out_names):
    """`korch export` the korch plan, build it with examples/c_consumer from a clean folder, run it
    once against `korch run`'s outputs: (peer argv, info dict); raises RuntimeError on failure."""
    import numpy as np
    from make_case import read_tensor
    T = str(args.threads)
    edir = os.path.join(work, "export")
    shutil.rmtree(edir, ignore_errors=True)
    os.makedirs(edir)
    pkg, cons = os.path.join(edir, "pkg"), os.path.join(edir, "consumer")
    info = {}
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    steps = [("export", [korch_bin, "export", model, "--plan", plan, "-o", pkg, "--threads", T]),
             ("configure", ["cmake", "-S", os.path.join(REPO, "examples", "c_consumer"), "-B", cons] + gen +
              ["-DKORCH_MODEL_DIR=" + pkg, "-DCMAKE_BUILD_TYPE=Release"]),
             ("build", ["cmake", "--build", cons, "-j", T])]
    for what, argv in steps:
        rc, out, err, secs = run_cmd(argv, args.export_timeout, env=korch_env(args),
                                     log_path=os.path.join(edir, what + ".log"))
        info[what + "_s"] = round(secs, 1)
        if rc != 0:
            raise RuntimeError("%s: %s" % (what, first_error(out, err, rc, args.export_timeout)))
    so = os.path.join(cons, "korch_model", "libkorch_model.so")
    info["so_mb"] = round(os.path.getsize(so) / 1e6, 1)
    exe = os.path.join(cons, "korch_consumer")
    ins = []
    for i, f in enumerate(in_paths):
        a = read_tensor(f)[1]
        raw = os.path.join(edir, "input_%d.bin" % i)
        a.astype(a.dtype.newbyteorder("<")).tofile(raw)
        ins += ["--input", raw]
    argv = [exe, pkg, "--threads", T] + ins
    odir = os.path.join(edir, "outputs")
    os.makedirs(odir)
    rc, out, err, secs = run_cmd(argv + ["--output-dir", odir], args.run_timeout, env=korch_env(args),
                                 log_path=os.path.join(edir, "run.log"))
    if rc != 0:
        raise RuntimeError("run: " + first_error(out, err, rc, args.run_timeout))
    if korch_outs is not None:
        got = [np.fromfile(os.path.join(odir, "output_%d.bin" % i), dtype=r.dtype).reshape(r.shape)
               for i, r in enumerate(korch_outs)]
        info["vs_korch_run"] = compare_sets(got, korch_outs, out_names)
        info["vs_korch_run"]["bit_identical"] = all(a.tobytes() == b.tobytes() for a, b in zip(got, korch_outs))
    return argv + ["--serve"], info


def machine_of(env):
    """The facts of the environment that make timings comparable (same CPU, cores, ISA, memory)."""
    return {k: env.get(k) for k in ("cpu", "cores", "cpus", "isa", "mem_gb", "gpu") if k != "gpu" or env.get(k)}


def measured_elsewhere(m, env):
    """True for a merged model that a run on another machine measured."""
    return bool(m.get("machine")) and m["machine"] != machine_of(env)


def describe_machine(m):
    return "%s, %s cores (%s logical CPUs), %s GB RAM; ISA: %s" % (m.get("cpu"), m.get("cores"), m.get("cpus"),
                                                                   m.get("mem_gb"), m.get("isa"))


def bench_model(args, name, korch_bin):
    case = name + ("_tiny" if args.quick else "")
    case_dir = os.path.join(args.cases, case)
    work = os.path.join(args.work, case)
    os.makedirs(work, exist_ok=True)
    res = {"model": name, "case": case, "case_dir": os.path.relpath(case_dir, REPO),
           "started": datetime.datetime.now().isoformat(timespec="seconds"),
           "load_before": [round(x, 2) for x in os.getloadavg()], "failures": [],
           "korch_binary_sha256": args.korch_sha, "korch_commit": args.korch_commit, "machine": args.machine}
    t_model = time.perf_counter()
    if not ensure_case(args, name, case, case_dir, res):
        res["failures"].append("export: " + res["export"]["error"])
        return res
    model = os.path.join(case_dir, "model.onnx")
    ds = os.path.join(case_dir, "test_data_set_0")
    sys.path.insert(0, os.path.join(REPO, "models"))
    from make_case import read_tensor
    in_files = sorted((f for f in os.listdir(ds) if f.startswith("input_")), key=lambda f: int(f[6:-3]))
    out_files = sorted((f for f in os.listdir(ds) if f.startswith("output_")), key=lambda f: int(f[7:-3]))
    in_specs = []
    inputs_desc = {}
    for f in in_files:
        n, a = read_tensor(os.path.join(ds, f))
        in_specs += ["--input", "%s=%s" % (n, os.path.join(ds, f))]
        inputs_desc[n] = "%s %s" % (a.dtype, "x".join(map(str, a.shape)))
    out_names = [read_tensor(os.path.join(ds, f))[0] for f in out_files]
    res["inputs"] = inputs_desc
    res["outputs"] = out_names
    res["model_mb"] = round(os.path.getsize(model) / 1e6, 1)
    T = str(args.threads)

    # ---- 1. optimisation cost: cold (fresh cache), then warm (same cache)
    cache = os.path.join(work, "profile_cache.sqlite")
    for f in (cache, cache + ".lock"):
        if os.path.exists(f):
            os.remove(f)
    plan = os.path.join(work, "korch_plan.json")
    opt = {}
    for phase in ("cold", "warm"):
        pdir = os.path.join(work, "plans_" + phase)
        shutil.rmtree(pdir, ignore_errors=True)
        os.makedirs(pdir)
        ppath = os.path.join(pdir, "korch_plan.json")
        jpath = os.path.join(pdir, "optimize.json")
        argv = [korch_bin, "optimize", model, "--cost", "measured", "--cache", cache, "-o", ppath,
                "--baselines", pdir, "--json", jpath, "--threads", T] + korch_device_flags(args)
        if args.optimize_budget:
            argv += ["--budget", str(args.optimize_budget)]
        log(name, ": korch optimize (%s cache)" % phase)
        rc, out, err, secs = run_cmd(argv, args.optimize_timeout, env=korch_env(args),
                                     log_path=os.path.join(work, "optimize_%s.log" % phase))
        o = {"seconds": round(secs, 2), "rc": rc, "command": " ".join(
            os.path.relpath(a, REPO) if a.startswith(REPO) else a for a in argv)}
        if rc == 0:
            try:
                with open(jpath) as f:
                    o.update(optimize_facts(json.load(f)))
            except (OSError, ValueError, KeyError, TypeError) as e:  # the plans are there; the figures are not
                o["json_error"] = "unreadable --json output %s: %s: %s" % (jpath, type(e).__name__, e)
                res["failures"].append("korch optimize (%s): %s" % (phase, o["json_error"]))
        else:
            o["error"] = first_error(out, err, rc, args.optimize_timeout)
            res["failures"].append("korch optimize (%s): %s" % (phase, o["error"]))
        opt[phase] = o
        if rc != 0:
            break
    res["optimize"] = opt
    plans = {}
    final = "warm" if opt.get("warm", {}).get("rc") == 0 else ("cold" if opt["cold"].get("rc") == 0 else None)
    if final:
        pdir = os.path.join(work, "plans_" + final)
        shutil.copy(os.path.join(pdir, "korch_plan.json"), plan)
        shutil.copy(os.path.join(pdir, "greedy.json"), os.path.join(work, "greedy.json"))
        plans = {"korch": plan, "korch-greedy": os.path.join(work, "greedy.json")}
        if final == "warm":
            try:
                with open(os.path.join(work, "plans_cold", "korch_plan.json")) as f1, open(plan) as f2:
                    # The same kernels and schedules (the note may differ: "(cached)").
                    opt["cold_warm_same_plan"] = json.load(f1)["kernels"] == json.load(f2)["kernels"]
            except (OSError, ValueError):
                pass
        for k, p in plans.items():
            try:
                with open(p) as f:
                    pj = json.load(f)
                res.setdefault("plan", {})[k] = {"kernels": len(pj.get("kernels", [])),
                                                 "predicted_ms": pj.get("predicted_ms")}
            except (OSError, ValueError):
                pass

    # ---- 2a. korch outputs + per-kernel profile (first run of a fresh process)
    outs_dir = os.path.join(work, "outputs")
    shutil.rmtree(outs_dir, ignore_errors=True)
    korch_outs = None
    if "korch" in plans:
        argv = [korch_bin, "run", model, "--plan", plan] + in_specs + \
            ["--output", os.path.join(outs_dir, "korch"), "--profile", "--threads", T] + korch_device_flags(args)
        log(name, ": korch run --output --profile")
        rc, out, err, secs = run_cmd(argv, args.run_timeout, env=korch_env(args),
                                     log_path=os.path.join(work, "korch_run_profile.log"))
        if rc == 0:
            ks, first_ms = parse_profile(out)
            try:
                with open(plan) as f:
                    pk = json.load(f).get("kernels", [])
                for k in ks:
                    if k["index"] < len(pk) and "+".join(pk[k["index"]].get("ops", [])) == k["ops"]:
                        k["plan_cost_us"] = pk[k["index"]].get("cost_us")
            except (OSError, ValueError):
                pass
            res["korch_profile"] = {"first_run_ms": first_ms, "kernels": ks, "process_s": round(secs, 1)}
            try:
                korch_outs = [read_tensor(os.path.join(outs_dir, "korch", "output_%d.pb" % i))[1]
                              for i in range(len(out_names))]
            except OSError as e:
                res["failures"].append("korch run --output: %s" % e)
        else:
            msg = first_error(out, err, rc, args.run_timeout)
            res["failures"].append("korch run: " + msg)
            res["korch_run_error"] = msg

    # ---- 2b. peers
    engines = [e for e in ENGINES if e not in args.skip_engines and
               (e != "korch-export" or name in args.export_models)]
    export_peer, export_error = None, None
    if "korch-export" in engines:
        if "korch" not in plans or "korch_run_error" in res:
            export_error = "no korch plan or `korch run` failed"
        else:
            log(name, ": korch export + build (examples/c_consumer)")
            try:
                export_peer, res["export_package"] = build_export(
                    args, korch_bin, work, model, plan, [os.path.join(ds, f) for f in in_files], korch_outs,
                    out_names)
            except (RuntimeError, OSError) as ex:
                export_error = "failed: %s" % ex
                res["failures"].append("korch-export: %s" % ex)
    peers = {}
    eng = {e: {} for e in engines}
    py_env = dict(os.environ)
    if args.passive:
        py_env["OMP_WAIT_POLICY"] = "PASSIVE"
    py_env["PYTHONUNBUFFERED"] = "1"
    for e in engines:
        if e == "korch-export":
            if export_error:
                eng[e]["error"] = export_error
                continue
            argv, env = export_peer, korch_env(args)
        elif e in PEERS:
            if e not in plans:
                eng[e]["error"] = "no plan (korch optimize failed)"
                continue
            if "korch_run_error" in res and e == "korch":
                eng[e]["error"] = "korch run failed: " + res["korch_run_error"]
                continue
            argv = [korch_bin, "run", model, "--plan", plans[e]] + in_specs + ["--serve", "--threads", T] + \
                korch_device_flags(args)
            env = korch_env(args)
        else:
            kind = {"ort": "ort", "openvino": "openvino", "torch-eager": "eager", "torch-compile": "compile"}[e]
            argv = [sys.executable, os.path.abspath(__file__), "--peer", kind, "--case-dir", case_dir,
                    "--model", name, "--threads", T]
            if args.quick:
                argv.append("--tiny")
            if args.passive:
                argv.append("--passive")
            if args.device == "cuda":
                argv += ["--device", "cuda"] + (["--tf32"] if args.tf32 else [])
            if kind != "compile":
                argv += ["--write-outputs", os.path.join(outs_dir, e)]
            env = py_env
        timeout = args.compile_timeout if e == "torch-compile" else args.start_timeout
        log(name, ": starting peer", e)
        try:
            p = Peer(e, argv, env, os.path.join(work, "peer_%s.log" % e), timeout)
        except PeerError as ex:
            eng[e]["error"] = "failed: %s" % ex
            res["failures"].append("%s: %s" % (e, ex))
            log(name, ":", e, "failed:", ex)
            continue
        peers[e] = p
        eng[e]["start_s"] = round(p.start_s, 2)
        for k in ("compile_s", "setup_s", "vs_case_reference", "version", "config"):
            if k in p.info:
                eng[e][k] = p.info[k]

    # ---- 3. warm-up, then interleaved rounds, each engine running a block of --block runs in a row
    times = {e: [] for e in peers}
    warm = {e: [] for e in peers}

    def block(e, runs, timeout):
        """`runs` runs of engine e in a row, then the busy-waited gap: an engine's thread pool
        spinning after its runs disturbs at most the first run of the next engine's block."""
        ts = []
        try:
            for _ in range(runs):
                ts.append(peers[e].run_once(timeout))
        except PeerError as ex:
            eng[e]["error"] = "failed during runs: %s" % ex
            res["failures"].append("%s: %s" % (e, ex))
            peers.pop(e).close()
        if args.gap_ms:
            busy_wait(args.gap_ms / 1e3)
        return ts

    for e in list(peers):
        warm[e] = block(e, args.warmup, args.run_timeout)
    est = {e: (statistics.median(warm[e][1:]) if len(warm[e]) > 1 else (warm[e] or [0])[0]) for e in peers}
    round_s = args.block * sum(est.values()) / 1e3 + len(peers) * args.gap_ms / 1e3
    rounds = args.rounds
    if round_s > 0 and rounds * round_s > args.round_budget_s:
        rounds = max(args.min_rounds, min(rounds, int(args.round_budget_s / round_s)))
    elif round_s > 0 and rounds * round_s < args.fast_budget_s:
        # Fast models (yolox_nano: 20 rounds in ~5 s): more rounds for a few seconds more, since
        # single runs of ~10 ms vary by several percent on a shared machine.
        rounds = max(rounds, min(args.max_rounds, int(args.fast_budget_s / round_s)))
    res["rounds"] = rounds
    res["block"] = args.block
    res["warmup"] = args.warmup
    res["estimated_round_s"] = round(round_s, 3)
    log(name, ": %d rounds (estimated %.2f s each)" % (rounds, round_s))
    window = CpuWindow([pid for p in peers.values() for pid in p.pids()])
    for r in range(rounds):
        # Each round starts with the next engine: in A/B races of one plan against another on the
        # 2-vCPU VM, whichever ran first in every round came out slower in 7 of 8 cases, by up to 5%.
        order = list(peers)  # without engines that failed
        first = r % len(order) if order else 0
        for e in order[first:] + order[:first]:
            times[e] += block(e, args.block, max(30.0, 20 * est.get(e, 1000) / 1e3))
    res["cpu_during_rounds"] = window.stop()
    for e, p in list(peers.items()):
        p.close()
        if p.peak_rss_mib is not None:
            eng[e]["peak_rss_mib"] = round(p.peak_rss_mib, 1)
            if p.info.get("rss_base_mib") is not None:
                eng[e]["peak_over_base_mib"] = round(p.peak_rss_mib - p.info["rss_base_mib"], 1)
    for e in engines:
        ts = times.get(e, [])
        if ts:
            eng[e].update(median_ms=statistics.median(ts), p10_ms=pct(ts, 0.1), p90_ms=pct(ts, 0.9),
                          min_ms=min(ts), n=len(ts), warmup_ms=warm.get(e, []), times_ms=ts)
        elif "error" not in eng[e]:
            eng[e]["error"] = "no timed runs"
    res["engines"] = eng

    # ---- 4. output checks
    import numpy as np

    def load_npy(e, pattern="output_%d.npy"):
        d = os.path.join(outs_dir, e)
        try:
            return [np.load(os.path.join(d, pattern % i)) for i in range(len(out_names))]
        except OSError:
            return None
    ort_outs, ov_outs, torch_outs = load_npy("ort"), load_npy("openvino"), load_npy("torch-eager")
    fp64_outs = load_npy("torch-eager", "output_fp64_%d.npy")
    checks = {}
    for key, a, b in (("korch_vs_ort", korch_outs, ort_outs), ("korch_vs_torch", korch_outs, torch_outs),
                      ("ort_vs_torch", ort_outs, torch_outs), ("korch_vs_openvino", korch_outs, ov_outs),
                      ("korch_vs_fp64", korch_outs, fp64_outs), ("ort_vs_fp64", ort_outs, fp64_outs),
                      ("openvino_vs_fp64", ov_outs, fp64_outs), ("torch_vs_fp64", torch_outs, fp64_outs)):
        if a is None or b is None:
            checks[key] = {"pass": None, "error": "outputs missing"}
        else:
            checks[key] = compare_sets(a, b, out_names)
    res["checks"] = checks

    # speedups of korch vs each peer
    km = eng.get("korch", {}).get("median_ms")
    res["speedup"] = {e: (eng[e]["median_ms"] / km) for e in engines
                      if e != "korch" and km and eng[e].get("median_ms")}
    res["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    res["load_after"] = [round(x, 2) for x in os.getloadavg()]
    res["wall_s"] = round(time.perf_counter() - t_model, 1)
    return res


# ==========================================================================================
# Environment description
# ==========================================================================================
def sh(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=REPO).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def environment(args, korch_bin):
    env = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "threads": args.threads,
           "quick": args.quick, "hostname": platform.node(), "python": platform.python_version()}
    lscpu = sh(["lscpu"])
    m = re.search(r"Model name:\s*(.*)", lscpu)
    env["cpu"] = m.group(1).strip() if m else platform.processor()
    env["cpus"] = os.cpu_count()
    m = re.search(r"Core\(s\) per socket:\s*(\d+)", lscpu)
    s = re.search(r"Socket\(s\):\s*(\d+)", lscpu)
    if m and s:
        env["cores"] = int(m.group(1)) * int(s.group(1))
    flags = re.search(r"Flags:\s*(.*)", lscpu)
    if flags:
        env["isa"] = " ".join(f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
                              if f in flags.group(1).split())
    try:
        with open("/proc/meminfo") as f:
            env["mem_gb"] = round(int(f.readline().split()[1]) / 1e6, 1)
    except OSError:
        pass
    commit = sh(["git", "rev-parse", "HEAD"])
    dirty = sh(["git", "status", "--porcelain", "--untracked-files=no"])
    env["korch_commit"] = commit[:12] + (" (+ uncommitted changes)" if dirty else "")
    st = os.stat(korch_bin)
    with open(korch_bin, "rb") as f:
        env["korch_binary_sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
    env["korch_binary_mtime"] = datetime.datetime.fromtimestamp(st.st_mtime).isoformat(timespec="seconds")
    vers = {}
    for pkg in ("onnxruntime", "openvino", "torch", "transformers", "timm", "torchvision", "onnx", "numpy", "yolox"):
        try:
            vers[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            vers[pkg] = "not installed"
    for pkg, deb in (("Halide", "libhalide14-0-dev"), ("oneDNN", "libdnnl-dev"), ("CBC", "coinor-libcbc-dev")):
        out = sh(["dpkg-query", "-W", "-f", "${Version}", deb])
        vers[pkg] = ("%s %s" % (deb, out)) if out else "unknown"
    env["versions"] = vers
    env["device"] = args.device
    if args.device == "cuda":
        gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"])
        env["gpu"] = gpu.splitlines()[0].strip() if gpu else "unknown (nvidia-smi did not answer)"
        try:
            import torch
            vers["torch_cuda"] = torch.version.cuda
            vers["cudnn"] = str(torch.backends.cudnn.version())
        except Exception:  # noqa: BLE001  the versions are informative only
            pass
        env["tf32"] = args.tf32
    env["omp_wait_policy"] = ("PASSIVE (ORT allow_spinning=0)" if args.passive else
                              "each engine's default (spinning; ORT allow_spinning=1), %g ms after each block of runs (the "
                              "harness busy-waits)" % args.gap_ms)
    return env


# ==========================================================================================
# Documents
# ==========================================================================================
def fmt_ms(x):
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 10:
        return "%.1f" % x
    if x >= 1:
        return "%.2f" % x
    return "%.3f" % x


def fmt_memory(r):
    """An engine's peak resident memory over its process's memory before the model was loaded (the
    interpreter and libraries a Python peer imported first), and the whole process's peak."""
    if r.get("peak_over_base_mib") is not None:
        return "%.0f (process %.0f)" % (r["peak_over_base_mib"], r["peak_rss_mib"])
    if r.get("peak_rss_mib") is not None:
        return "process %.0f" % r["peak_rss_mib"]
    return ""


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarize(data):
    models = data["models"]
    s = {}
    gs = [m["speedup"]["korch-greedy"] for m in models if m.get("speedup", {}).get("korch-greedy")]
    s["geomean_vs_greedy"] = geomean(gs)
    s["geomean_vs_greedy_n"] = len(gs)
    for e in ("ort", "openvino", "torch-eager", "torch-compile"):
        xs = [m["speedup"][e] for m in models if m.get("speedup", {}).get(e)]
        s["geomean_vs_" + e] = geomean(xs)
        s["geomean_vs_%s_n" % e] = len(xs)
    # korch >= the best of ORT and OpenVINO on every model measured (issue 25)
    best = []
    for m in models:
        e = m.get("engines", {})
        k = e.get("korch", {}).get("median_ms")
        peers = [(e[x]["median_ms"], x) for x in ("ort", "openvino") if e.get(x, {}).get("median_ms")]
        if k and peers:
            o, x = min(peers)
            best.append((m["case"], k <= o, "korch %s ms vs %s %s ms (%.2fx)" % (fmt_ms(k), ENGINE_LABEL[x], fmt_ms(o),
                                                                               o / k)))
    s["target_best_cpu_peer"] = best
    # target 1: korch <= the peer on each of the five paper models (ORT on the CPU, torch.compile on a GPU)
    peer = "torch-compile" if data["environment"].get("device") == "cuda" else "ort"
    s["target_peer"] = peer
    t1 = []
    for n in PAPER_FIVE:
        m = next((m for m in models if m["model"] == n), None)
        if m is None:
            t1.append((n, None, "not run"))
            continue
        k = m.get("engines", {}).get("korch", {}).get("median_ms")
        o = m.get("engines", {}).get(peer, {}).get("median_ms")
        if k is None or o is None:
            t1.append((n, None, "no measurement (%s)" % ("korch" if k is None else ENGINE_LABEL[peer])))
        else:
            t1.append((n, k <= o, "korch %s ms vs %s %s ms (%.2fx)" % (fmt_ms(k), ENGINE_LABEL[peer], fmt_ms(o), o / k)))
    s["target_ort"] = t1
    return s


def write_png(data, path):
    """Paper-style figure: per model, each peer's latency relative to korch's (korch = 1.0),
    log scale, bars growing up (slower than korch) or down (faster) from 1."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    allm = data["models"]
    models = [m for m in allm if m.get("engines", {}).get("korch", {}).get("median_ms")]
    if not models:
        return False
    failed = [m for m in allm if m not in models]
    peers = PEER_ENGINES
    colors = {"korch-greedy": "#6baed6", "ort": "#fd8d3c", "openvino": "#e7298a", "torch-eager": "#74c476",
              "torch-compile": "#9e9ac8"}
    names = [m["case"] for m in models] + ["geomean"] + [m["case"] for m in failed]
    fig, ax = plt.subplots(figsize=(max(6.5, 1.25 * len(names) + 2.5), 4.4))
    width = 0.8 / len(peers)
    allv = [1.0]
    for j, e in enumerate(peers):
        vals = []
        for m in models:
            v = m["engines"].get(e, {}).get("median_ms")
            vals.append(v / m["engines"]["korch"]["median_ms"] if v else None)
        vals.append(geomean([v for v in vals if v]))
        xs = [i + (j - (len(peers) - 1) / 2) * width for i in range(len(names))]
        pts = [(x, v) for x, v in zip(xs, vals) if v]
        allv += [v for _, v in pts]
        ax.bar([x for x, _ in pts], [v - 1.0 for _, v in pts], width, bottom=1.0, label=ENGINE_LABEL[e],
               color=colors[e], edgecolor="black", linewidth=0.4)
        for x, v in pts:
            ax.text(x, v * (1.04 if v >= 1 else 0.96), "%.2f" % v, ha="center",
                    va="bottom" if v >= 1 else "top", fontsize=6, rotation=90)
        for x, v in zip(xs, vals):
            if v is None:
                ax.text(x, 1.0, "x", ha="center", va="center", color=colors[e], fontsize=9, fontweight="bold")
    for i, m in enumerate(failed):
        ax.text(len(models) + 1 + i, 1.0, "no korch\nresult", ha="center", va="center", fontsize=7,
                color="#d62728", bbox=dict(facecolor="white", edgecolor="#d62728", linewidth=0.5))
    ax.set_yscale("log", base=2)
    lo, hi = min(allv), max(allv)
    ax.set_ylim(min(lo / 1.6, 0.5), max(hi * 1.6, 2.0))
    ticks = [2.0 ** k for k in range(-10, 11) if min(lo / 1.6, 0.5) <= 2.0 ** k <= max(hi * 1.6, 2.0)]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: ("%g" % v)))
    ax.axhline(1.0, color="#d62728", linewidth=1.2, label="korch (= 1.0)")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_ylabel("latency relative to korch (log scale)")
    ax.set_title("CPU latency relative to korch, batch 1, %d threads, %s\n(above the line: slower than korch; "
                 "below: faster)" % (data["environment"]["threads"], data["environment"]["cpu"]), fontsize=9)
    ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def short(msg, n=240):
    """One-line, bounded error text for tables (the JSON keeps the full message)."""
    msg = " ".join(str(msg).split()).replace("|", "/").replace("`", "'")
    return msg if len(msg) <= n else msg[:n - 3] + "..."


def fp32_noise(m, key="korch_vs_ort"):
    """korch fails a check, but ORT and PyTorch disagree about as much with each other."""
    c = m.get("checks", {})
    k, o = c.get(key, {}), c.get("ort_vs_torch", {})
    return (k.get("pass") is False and o.get("pass") is False and "max_abs" in k and "max_abs" in o
            and k["max_abs"] <= 2 * o["max_abs"])


def fp64_cell(c):
    if not c or c.get("pass") is None or "worst_tol_ratio" not in c:
        return "-"
    return "%.2f / %.2g" % (c["worst_tol_ratio"], c["mean_abs"])


def check_cell(c):
    if c is None:
        return "-"
    if c.get("pass") is None:
        return "n/a (%s)" % c.get("error", "")
    return "%s (max abs %.2g, rel %.2g)" % ("pass" if c["pass"] else "**FAIL**", c["max_abs"], c["max_rel"])


def write_export_md(data, w):
    """The exported library (korch-export) next to `korch run` (korch), same plan and threads."""
    ms = [m for m in data["models"] if "korch-export" in m.get("engines", {})]
    if not ms:
        return
    w("## Exported library vs korch run")
    w("")
    w("The korch plan exported with `korch export`, built by examples/c_consumer and timed by its `--serve` "
      "mode, against `korch run --serve` with the same plan and threads, in the same interleaved rounds.")
    w("")
    w("| model | korch run ms (p10-p90) | exported library ms (p10-p90) | exported / korch run | outputs vs korch run | export + build s |")
    w("|---|---:|---:|---:|---|---:|")
    for m in ms:
        e = m["engines"]
        k, x = e.get("korch", {}), e["korch-export"]
        rng = lambda r: "%s (%s-%s)" % (fmt_ms(r["median_ms"]), fmt_ms(r["p10_ms"]), fmt_ms(r["p90_ms"])) \
            if r.get("median_ms") else ("failed" if "error" in r else "-")
        ratio = "%.3f" % (x["median_ms"] / k["median_ms"]) if x.get("median_ms") and k.get("median_ms") else "-"
        pk = m.get("export_package", {})
        v = pk.get("vs_korch_run")
        out = "-" if not v else ("bit-identical" if v.get("bit_identical") else
                                 ("pass" if v.get("pass") else "**FAIL**") + " (max abs %.2g)" % v.get("max_abs", 0))
        secs = sum(pk.get(s, 0) for s in ("export_s", "configure_s", "build_s"))
        w("| %s | %s | %s | %s | %s | %s |" % (m["case"], rng(k), rng(x), ratio, out,
                                              "%.0f" % secs if secs else "-"))
    w("")
    w("Outputs are compared without `HL_JIT_TARGET=host-strict_float`, so JIT and AOT Halide code may differ "
      "by an ulp; `bench/check_export_models.sh` checks bit-for-bit equality with strict_float.")
    w("")


def write_md(data, path, png_name):
    env = data["environment"]
    s = summarize(data)
    L = []
    w = L.append
    gpu = env.get("device") == "cuda"
    w("# korch vs %s on the Korch paper's models and torchvision's%s" % (
        "PyTorch eager and torch.compile on an NVIDIA GPU" if gpu else "ONNX Runtime, OpenVINO and PyTorch",
        " (quick: tiny variants)" if env["quick"] else ""))
    w("")
    w("Generated by `bench/run.sh` / `bench/run_benchmarks.py` on %s; every number below comes from "
      "`%s`. How it is measured: [bench/README.md](../bench/README.md)." % (env["date"], data.get("json_name", "benchmarks.json")))
    w("")
    w("## Machine and versions")
    w("")
    w("| | |")
    w("|---|---|")
    w("| CPU | %s, %s cores (%s logical CPUs), %s GB RAM; ISA: %s |" % (env["cpu"], env.get("cores", "?"), env["cpus"],
                                                                     env.get("mem_gb", "?"), env.get("isa", "")))
    if gpu:
        w("| GPU | %s (name, driver, memory, compute capability); korch `--backend cuda`, PyTorch on `cuda`, fp32, "
          "TF32 %s on both sides; every timed run copies the inputs to the device and the outputs back |"
          % (env.get("gpu"), "on" if env.get("tf32") else "off"))
        w("| CUDA libraries | PyTorch's CUDA %s, cuDNN %s |" % (env["versions"].get("torch_cuda"),
                                                            env["versions"].get("cudnn")))
    w("| threads | %d intra-op threads for every engine (ORT inter-op 1, sequential; OpenVINO CPU plugin, f32, "
      "PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS = threads; torch interop 1); "
      "OpenMP wait policy %s |" % (env["threads"], env["omp_wait_policy"]))
    w("| korch | commit %s, binary sha256 %s (built %s) |" % (env["korch_commit"], env["korch_binary_sha256"],
                                                           env["korch_binary_mtime"]))
    v = env["versions"]
    w("| libraries | onnxruntime %s, openvino %s, torch %s, transformers %s, timm %s, torchvision %s, yolox %s, onnx %s, "
      "numpy %s |" % (v["onnxruntime"], v.get("openvino", "-"), v["torch"], v["transformers"], v["timm"],
                      v["torchvision"], v["yolox"], v["onnx"], v["numpy"]))
    w("| korch backends | Halide: %s; oneDNN: %s; CBC: %s |" % (v["Halide"], v["oneDNN"], v["CBC"]))
    w("| Python | %s |" % env["python"])
    w("| load average (1/5/15 min) | before this run: %s; after: %s |" % (
        " / ".join("%.2f" % x for x in data["load_before"]), " / ".join("%.2f" % x for x in data["load_after"])))
    w("")
    busy = [m for m in data["models"] if m.get("cpu_during_rounds", {}).get("foreign_cores", 0) > 0.25]
    if data["load_before"][0] > 0.5 * env["cpus"] or busy:
        w("> **The machine was loaded** (1-min load average %.2f on %d CPUs before the run%s). Other processes "
          "compete for the cores, so latencies are inflated and noisy and the comparisons below are "
          "indicative only; re-run on an idle machine for publishable numbers. `foreign CPU` in the tables is "
          "the CPU time (in cores) that processes other than the benchmark used while it timed."
          % (data["load_before"][0], env["cpus"],
             "; other processes used %s cores during the timed rounds of %s" % (
                 ", ".join("%.2f" % m["cpu_during_rounds"]["foreign_cores"] for m in busy),
                 ", ".join(m["case"] for m in busy)) if busy else ""))
        w("")

    # ---- targets
    w("## Targets")
    w("")
    t1 = s["target_ort"]
    decided = [x for x in t1 if x[1] is not None]
    if len(decided) == len(PAPER_FIVE):
        verdict = "**met**" if all(x[1] for x in t1) else "**not met**"
    elif any(x[1] is False for x in t1):
        verdict = "**not met**"
    else:
        verdict = "**not established** (only %d of the 5 models measured)" % len(decided)
    w("- korch <= %s on each of the five paper models (%s): %s" % (ENGINE_LABEL[s["target_peer"]],
                                                                 ", ".join(PAPER_FIVE), verdict))
    for n, ok, txt in t1:
        w("  - %s: %s — %s" % (n + ("_tiny" if env["quick"] else ""),
                               {True: "met", False: "not met", None: "n/a"}[ok], txt))
    g = s["geomean_vs_greedy"]
    if g is None:
        w("- korch >= %.2fx faster than its own greedy plan (geomean): **not established** (no model measured)"
          % SPEEDUP_TARGET)
    else:
        w("- korch >= %.2fx faster than its own greedy plan (geomean): %s — geomean %.3fx over %d model(s)%s"
          % (SPEEDUP_TARGET, "**met**" if g >= SPEEDUP_TARGET else "**not met**", g, s["geomean_vs_greedy_n"],
             " (only %d of %d)" % (s["geomean_vs_greedy_n"], len(ALL_MODELS))
             if s["geomean_vs_greedy_n"] < len(ALL_MODELS) else ""))
    if s["target_best_cpu_peer"]:
        t = s["target_best_cpu_peer"]
        w("- korch <= the faster of ONNX Runtime and OpenVINO on every model measured: %s" % (
            "**met**" if all(x[1] for x in t) else "**not met**"))
        for n, ok, txt in t:
            w("  - %s: %s — %s" % (n, "met" if ok else "not met", txt))
    if s["geomean_vs_ort"] and not gpu:
        w("- geomean speedup of korch vs ONNX Runtime over all %d models measured >= %.1fx: %s (%.3fx)" % (
            s["geomean_vs_ort_n"], GEOMEAN_VS_ORT_TARGET,
            "**met**" if s["geomean_vs_ort"] >= GEOMEAN_VS_ORT_TARGET else "**not met**", s["geomean_vs_ort"]))
    for e in ("ort", "openvino", "torch-eager", "torch-compile"):
        if s["geomean_vs_" + e]:
            w("- geomean speedup of korch vs %s: %.3fx%s" % (
                ENGINE_LABEL[e], s["geomean_vs_" + e],
                " (target on a GPU: >= 1.3x)" if gpu and e == "torch-compile" else ""))
    kept = [m["case"] for m in data["models"]
            if "greedy plan's kernels kept" in ((m.get("optimize") or {}).get("warm") or {}).get("plan_race", "")]
    if kept:
        w("- the plan race kept the greedy plan's kernels (measured >2%% faster end to end than the BLP's plan) "
          "on: %s; there korch runs the greedy plan and korch vs greedy is ~1.0x by construction" % ", ".join(kept))
    if env["quick"]:
        w("")
        w("(--quick: these are the tiny test variants; the targets are about the full models.)")
    w("")
    if data.get("png"):
        w("![latency relative to korch](%s)" % png_name)
        w("")
        w("Latency of each engine relative to korch's (median over median; korch = 1.0, the red line; log "
          "scale; bars above the line: slower than korch, below: faster; x = no measurement).")
        w("")

    # ---- summary table
    w("## Summary (median ms over the interleaved rounds)")
    w("")
    w("Every round runs each engine %s times in a row (a block), with the harness's gap after each block; so "
      "an engine's thread pool that keeps spinning after its runs (ORT's, OpenVINO's) disturbs at most the first "
      "run of the next engine's block. Medians are over all timed runs of all rounds." % data["args"].get("block", 1))
    w("")
    w("| model | korch | korch greedy | ONNX Runtime | OpenVINO | PyTorch eager | torch.compile | korch vs greedy | vs ORT | vs OpenVINO | vs eager | vs compile | outputs korch vs ORT |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for m in data["models"]:
        e = m.get("engines", {})
        sp = m.get("speedup", {})
        cells = [fmt_ms(e.get(x, {}).get("median_ms")) if e.get(x, {}).get("median_ms") else
                 ("failed" if "error" in e.get(x, {}) else "-") for x in ENGINES if x != "korch-export"]
        spc = ["%.2fx" % sp[x] if sp.get(x) else "-" for x in PEER_ENGINES]
        ck = m.get("checks", {}).get("korch_vs_ort")
        cc = "-"
        if ck and ck.get("pass") is not None:
            cc = "pass" if ck["pass"] else "**FAIL**" + (" (as ORT vs PyTorch)" if fp32_noise(m) else "")
        w("| %s%s | %s | %s | %s |" % (m["case"], " (other machine)" if measured_elsewhere(m, env) else "",
                                       " | ".join(cells),
                                       " | ".join(spc), cc))
    w("")
    w("Speedup = peer median / korch median (> 1: korch is faster). \"other machine\": merged from a run on "
      "another machine (see its section); its speedups hold for that machine.")
    w("")
    write_export_md(data, w)

    # ---- per model
    w("## Per model")
    for m in data["models"]:
        w("")
        w("### %s" % m["case"])
        w("")
        if m.get("inputs"):
            w("Inputs: %s; outputs: %s; model.onnx %s MB. Started %s, %s s for this model; load average before %s, "
              "after %s." % (", ".join("`%s` %s" % kv for kv in m["inputs"].items()),
                             ", ".join("`%s`" % o for o in m.get("outputs", [])), m.get("model_mb"),
                             m["started"], m.get("wall_s"), m["load_before"][0], m.get("load_after", ["?"])[0]))
            w("")
        if m.get("korch_binary_sha256") and m["korch_binary_sha256"] != env["korch_binary_sha256"]:
            w("**Measured with another korch build** than the one in the header (--merge): commit %s, binary "
              "sha256 %s." % (m.get("korch_commit"), m["korch_binary_sha256"]))
            w("")
        if measured_elsewhere(m, env):
            w("**Measured on another machine** than the one in the header (--merge): %s; compare its engines "
              "with each other, not with other models' figures." % describe_machine(m["machine"]))
            w("")
        if "korch_binary_sha256" not in m and data.get("merged"):
            w("Measured in an earlier run (--merge); its korch build was not recorded.")
            w("")
        if m.get("failures"):
            w("Failures:")
            w("")
            for f in m["failures"]:
                w("- `%s`" % short(f, 400))
            w("")
        e = m.get("engines")
        if e:
            cpu = m.get("cpu_during_rounds", {})
            w("%d warm-up runs, then %d interleaved rounds of %d runs per engine%s; CPU during the rounds: "
              "benchmark %.2f cores, foreign %.2f cores (%s s)." % (m["warmup"], m["rounds"], m.get("block", 1),
                                              " (lowered from %d for time)" % data["args"]["rounds"]
                                              if m["rounds"] < data["args"]["rounds"] else "",
                                              cpu.get("own_cores", 0), cpu.get("foreign_cores", 0), cpu.get("wall_s")))
            w("")
            w("| engine | median ms | p10-p90 ms | min ms | korch speedup | peak memory MiB | setup/compile | notes |")
            w("|---|---:|---:|---:|---:|---:|---|---|")
            for x in ENGINES:
                r = e.get(x)
                if r is None:
                    continue
                setup = []
                if "start_s" in r:
                    setup.append("ready in %.1f s" % r["start_s"])
                if "compile_s" in r:
                    setup.append("compile (first call) %.1f s" % r["compile_s"])
                note = r.get("error", "")
                if x in m.get("plan", {}):
                    note = ("%d kernels, korch-predicted %s ms. " % (m["plan"][x]["kernels"],
                                                                     fmt_ms(m["plan"][x]["predicted_ms"]))) + note
                if r.get("vs_case_reference"):
                    ok = all(v.get("pass") for v in r["vs_case_reference"])
                    note += " outputs vs case reference: %s" % ("match" if ok else "DIFFER (max abs %.2g)" % max(
                        v.get("max_abs", 0) for v in r["vs_case_reference"]))
                mem = fmt_memory(r)
                if r.get("median_ms"):
                    sp = m["speedup"].get(x)
                    w("| %s | %s | %s-%s | %s | %s | %s | %s | %s |" % (
                        ENGINE_LABEL[x], fmt_ms(r["median_ms"]), fmt_ms(r["p10_ms"]), fmt_ms(r["p90_ms"]),
                        fmt_ms(r["min_ms"]), "%.2fx" % sp if sp else "", mem, "; ".join(setup), note.strip()))
                else:
                    w("| %s | - | - | - | | %s | %s | %s |" % (ENGINE_LABEL[x], mem, "; ".join(setup),
                                                             short(note.strip())))
            w("")
        o = m.get("optimize")
        if o:
            w("korch optimisation cost (`korch optimize --cost measured`, %d threads):" % env["threads"])
            w("")
            w("| cache | wall s | candidates enumerated | priced structures | kernels measured (timed now / from cache) | dropped | mismatches | BLP solves | solver s | partitions | optimality |")
            w("|---|---:|---:|---:|---|---:|---:|---:|---:|---|---|")
            for ph in ("cold", "warm"):
                r = o.get(ph)
                if not r:
                    continue
                if r.get("rc") != 0:
                    w("| %s | %.1f | failed (see above) | | | | | | | | |" % (ph, r["seconds"]))
                    continue
                w("| %s | %.1f | %s | %s | %s (%s / %s) | %s | %s | %s | %s | %s (%s solved) | %s |" % (
                    ph, r["seconds"], r.get("candidates", "?"), r.get("priced", "?"), r.get("measured", "?"),
                    r.get("timed_now", "?"), r.get("from_cache", "?"), r.get("dropped", "?"), r.get("mismatches", "?"),
                    r.get("blp_solves", "?"), r.get("solver_s", "?"), r.get("partitions", "?"),
                    r.get("partitions_solved", "?"), r.get("optimality", "?")))
            w("")
            warm = o.get("warm") or o.get("cold")
            if warm and warm.get("plans"):
                p = warm["plans"]
                w("Plans (kernels / korch-predicted ms): " + ", ".join(
                    "%s %d / %s" % (k, v["kernels"], fmt_ms(v["predicted_ms"])) for k, v in p.items()) +
                  ("; predicted korch vs greedy %.2fx" % warm["predicted_speedup_vs_greedy"]
                   if warm.get("predicted_speedup_vs_greedy") else "") +
                  ("; cold and warm runs chose the same plan" if o.get("cold_warm_same_plan") else
                   ("; **cold and warm runs chose different plans**" if o.get("cold_warm_same_plan") is False else "")) + ".")
                w("")
                if o.get("warm") and o["warm"].get("stored_solutions") is not None:
                    w("The warm run took %d stored partition solutions (the cold run's choices, replayed without a "
                      "solve)." % o["warm"]["stored_solutions"])
                    w("")
                if warm.get("plan_race"):
                    w("Plan race (korch optimize times the BLP's plan and the greedy plan end to end and keeps "
                      "greedy's kernels only if they are >2% faster): " + warm["plan_race"] +
                      (" (the BLP's plan had %d kernels, predicted %s)" % (warm["blp_kernels"],
                                                                         fmt_ms(warm["blp_predicted_ms"]))
                       if warm.get("blp_kernels") else "") + ".")
                    w("")
        c = m.get("checks")
        if c:
            w("Output check (|a-b| <= %g + %g|b|, b = the second engine named):" % (ATOL, RTOL))
            w("")
            w("| korch vs ORT | korch vs PyTorch | ORT vs PyTorch | korch vs OpenVINO |")
            w("|---|---|---|---|")
            w("| %s | %s | %s | %s |" % (check_cell(c.get("korch_vs_ort")), check_cell(c.get("korch_vs_torch")),
                                         check_cell(c.get("ort_vs_torch")), check_cell(c.get("korch_vs_openvino"))))
            w("")
            if any(c.get(k, {}).get("pass") is not None for k in ("korch_vs_fp64", "ort_vs_fp64", "openvino_vs_fp64",
                                                                 "torch_vs_fp64")):
                w("Error against the model evaluated in float64 (PyTorch, same weights and inputs): worst "
                  "|a-ref| / (%g + %g|ref|), then mean |a-ref| (of the output where it is largest); lower is "
                  "closer to the exact result:" % (ATOL, RTOL))
                w("")
                w("| korch | ONNX Runtime | OpenVINO | PyTorch eager |")
                w("|---|---|---|---|")
                w("| %s | %s | %s | %s |" % tuple(fp64_cell(c.get(k)) for k in ("korch_vs_fp64", "ort_vs_fp64",
                                                                                 "openvino_vs_fp64", "torch_vs_fp64")))
                w("")
            noisy = [k for k in ("korch_vs_ort", "korch_vs_torch") if fp32_noise(m, k)]
            if noisy:
                w("ONNX Runtime and PyTorch fail the same tolerance against each other, by about as much as "
                  "korch does (max abs %.2g; korch %s): on this model the tolerance is below the spread that "
                  "fp32 summation order causes between correct implementations (largest output magnitude "
                  "%.3g), so the failure alone is no evidence of a korch error." % (
                      c["ort_vs_torch"]["max_abs"], ", ".join(
                          "%.2g vs %s" % (c[k]["max_abs"], "ORT" if k == "korch_vs_ort" else "PyTorch")
                          for k in noisy),
                      max(o.get("ref_max_abs", 0) for o in c["ort_vs_torch"].get("outputs", [{}]))))
                w("")
        km = (e or {}).get("korch", {}).get("median_ms")
        om = (e or {}).get("ort", {}).get("median_ms")
        prof = m.get("korch_profile")
        if km and om and km > om and prof and prof.get("kernels"):
            ks = sorted(prof["kernels"], key=lambda k: -k["ms"])[:10]
            tot = sum(k["ms"] for k in prof["kernels"])
            w("korch is slower than ONNX Runtime here (%s vs %s ms). Top 10 of korch's %d kernels by time in "
              "`korch run --profile` (each kernel's median over 10 runs after a warm-up; total %s ms), with "
              "the cost korch's profiler measured for the same kernel alone during `optimize` (plan `cost_us`, "
              "before layout links):"
              % (fmt_ms(km), fmt_ms(om), len(prof["kernels"]), fmt_ms(tot)))
            w("")
            w("| # | in-plan ms | share | profiled ms (plan) | primitives | backend / schedule |")
            w("|---:|---:|---:|---:|---|---|")
            for k in ks:
                pc = k.get("plan_cost_us")
                w("| %d | %s | %.0f%% | %s | %s | %s |" % (
                    k["index"], fmt_ms(k["ms"]), 100 * k["ms"] / max(tot, 1e-9),
                    fmt_ms(pc / 1e3) if pc is not None else "-", k["ops"], k["schedule"].replace("|", "/")))
            pks = [k for k in prof["kernels"] if k.get("plan_cost_us") is not None]
            if pks:
                top = sorted(pks, key=lambda k: -k["plan_cost_us"])[:10]
                tot2 = sum(k["plan_cost_us"] for k in pks) / 1e3
                w("")
                w("Top 10 by korch's steady-state profile (sum %s ms over %d kernels): %s." % (
                    fmt_ms(tot2), len(pks), "; ".join("#%d %s %s ms (%s)" % (
                        k["index"], k["ops"], fmt_ms(k["plan_cost_us"] / 1e3), k["schedule"].split(" (")[0])
                        for k in top)))
            w("")
    w("")
    w("## Reproduce")
    w("")
    w("    %s" % data["command"])
    w("")
    with open(path, "w") as f:
        f.write("\n".join(L))


def render(data, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    png = os.path.join(out_dir, "benchmarks.png")
    try:
        data["png"] = write_png(data, png)
    except Exception as e:  # noqa: BLE001  the doc must still be written
        log("plot failed:", e)
        data["png"] = False
    with open(os.path.join(out_dir, "benchmarks.json"), "w") as f:
        json.dump(data, f, indent=1)
    write_md(data, os.path.join(out_dir, "benchmarks.md"), "benchmarks.png")
    log("wrote", os.path.join(out_dir, "benchmarks.{json,md,png}"))


# ==========================================================================================
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny variants of the models (a few minutes in all)")
    ap.add_argument("--models", default=None, help="comma-separated subset of: " + ",".join(ALL_MODELS))
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads for every engine (default 2)")
    ap.add_argument("--rounds", type=int, default=20, help="interleaved timed rounds (default 20)")
    ap.add_argument("--min-rounds", type=int, default=5, help="never fewer rounds than this (default 5)")
    ap.add_argument("--max-rounds", type=int, default=200,
                    help="fast models get more rounds than --rounds, up to this many (default 200)")
    ap.add_argument("--fast-budget-s", type=float, default=None,
                    help="seconds of timed rounds that fast models are raised to (default 30; quick 0: off)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up runs per engine (default 3)")
    ap.add_argument("--block", type=int, default=3,
                    help="runs of one engine in a row in every round (default 3, at least 3): ORT's and "
                    "OpenVINO's worker threads keep spinning after a run, which disturbs only the next block's "
                    "first run, not every run of the engine after them")
    ap.add_argument("--round-budget-s", type=float, default=None,
                    help="target seconds of timed rounds per model; rounds are lowered to fit (default 150)")
    ap.add_argument("--gap-ms", type=float, default=None,
                    help="gap between two engines' runs (the harness busy-waits), so that one engine's "
                    "spinning threads are asleep before the next runs (after a run, korch's libgomp threads "
                    "spin ~11 ms, PyTorch's ~20 ms of CPU; default 40, 0 with --passive)")
    ap.add_argument("--passive", action="store_true",
                    help="make every thread pool sleep when idle (OMP_WAIT_POLICY=PASSIVE, ORT allow_spinning=0) "
                    "instead of each engine's default spinning; for a machine with other load")
    ap.add_argument("--export-models", default=DEFAULT_EXPORT_MODELS,
                    help="models that also run as a `korch export` package (engine korch-export; "
                    "default %s; 'none' for no model)" % DEFAULT_EXPORT_MODELS)
    ap.add_argument("--skip-engines", default="", help="comma-separated engines to leave out: " + ",".join(ENGINES))
    ap.add_argument("--cases", default=None, help="case directories (default build/bench/cases)")
    ap.add_argument("--work", default=None, help="plans, caches, logs (default build/bench/work[_quick])")
    ap.add_argument("--out-dir", default=None, help="where benchmarks.{json,md,png} go "
                    "(default docs/, with --quick build/bench/quick/)")
    ap.add_argument("--korch", default=os.path.join(REPO, "build", "korch"), help="korch binary")
    ap.add_argument("--merge", action="store_true",
                    help="keep the models of an existing OUT/benchmarks.json that this run does not measure")
    ap.add_argument("--render-only", action="store_true", help="rewrite md/png from OUT/benchmarks.json")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cpu (default), or cuda: korch's CUDA backend vs PyTorch eager and torch.compile on the GPU")
    ap.add_argument("--tf32", action="store_true", help="with --device cuda: TF32 matrix math on both sides")
    ap.add_argument("--optimize-budget", type=float, default=None,
                    help="korch optimize --budget SECONDS (stop profiling there; default no budget)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="Unix time: no model starts later than --model-reserve-s before it (the rest are "
                    "reported as not run)")
    ap.add_argument("--model-reserve-s", type=float, default=120,
                    help="with --deadline: seconds a model needs at least (default 120)")
    ap.add_argument("--export-timeout", type=float, default=900)
    ap.add_argument("--optimize-timeout", type=float, default=None, help="seconds (default 3600; quick 600)")
    ap.add_argument("--start-timeout", type=float, default=None, help="seconds for a peer to get ready (default 900)")
    ap.add_argument("--compile-timeout", type=float, default=None, help="seconds for torch.compile (default 1200)")
    ap.add_argument("--run-timeout", type=float, default=None, help="seconds for one run (default 600)")
    # peer mode
    ap.add_argument("--peer", choices=["ort", "openvino", "eager", "compile"], help=argparse.SUPPRESS)
    ap.add_argument("--case-dir", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--write-outputs", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.peer:
        return _peer_main(args)
    if args.block < 3:
        ap.error("--block must be at least 3")

    q = args.quick
    args.cases = os.path.abspath(args.cases or os.path.join(REPO, "build", "bench", "cases"))
    args.work = os.path.abspath(args.work or os.path.join(REPO, "build", "bench", "work_quick" if q else "work"))
    args.out_dir = os.path.abspath(args.out_dir or os.path.join(REPO, "build", "bench", "quick") if q else
                                   args.out_dir or os.path.join(REPO, "docs"))
    if args.render_only:
        with open(os.path.join(args.out_dir, "benchmarks.json")) as f:
            render(json.load(f), args.out_dir)
        return 0
    args.round_budget_s = args.round_budget_s or (20 if q else 150)
    if args.fast_budget_s is None:
        args.fast_budget_s = 0 if q else 30
    if args.gap_ms is None:
        args.gap_ms = 0.0 if args.passive else 40.0
    args.optimize_timeout = args.optimize_timeout or (600 if q else 3600)
    args.start_timeout = args.start_timeout or (300 if q else 900)
    args.compile_timeout = args.compile_timeout or (600 if q else 1200)
    args.run_timeout = args.run_timeout or (60 if q else 600)
    args.skip_engines = [e for e in args.skip_engines.split(",") if e]
    if args.device == "cuda":  # CPU-only engines
        args.skip_engines += [e for e in ("ort", "korch-export") if e not in args.skip_engines]
    args.export_models = [m for m in args.export_models.split(",") if m and m != "none"]
    bad = [m for m in args.export_models if m not in ALL_MODELS]
    if bad:
        ap.error("unknown --export-models %s (choose from %s)" % (bad, ", ".join(ALL_MODELS)))
    bad = [e for e in args.skip_engines if e not in ENGINES]
    if bad:
        ap.error("unknown engine(s) %s (choose from %s)" % (bad, ", ".join(ENGINES)))
    models = [m.strip() for m in args.models.split(",")] if args.models else list(ALL_MODELS)
    bad = [m for m in models if m not in ALL_MODELS]
    if bad:
        ap.error("unknown model(s) %s (choose from %s)" % (bad, ", ".join(ALL_MODELS)))
    if not os.path.isfile(args.korch):
        ap.error("no korch binary at %s (build it with scripts/build.sh)" % args.korch)
    os.makedirs(args.cases, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    # Snapshot the binary: other people may rebuild build/korch while this runs.
    korch_bin = os.path.join(args.work, "korch")
    shutil.copy2(args.korch, korch_bin + ".tmp")
    os.replace(korch_bin + ".tmp", korch_bin)

    cmd = "bench/run.sh" + (" --quick" if q else "") + (" --models " + args.models if args.models else "") + \
        " --threads %d --rounds %d --block %d" % (args.threads, args.rounds, args.block) + \
        (" --merge" if args.merge else "")
    if args.device == "cuda":
        cmd = "scripts/gpu_check.sh OUT_DIR (bench/run_benchmarks.py --device cuda%s%s)" % (
            " --models " + args.models if args.models else "",
            " --optimize-budget %g" % args.optimize_budget if args.optimize_budget else "")
    data = {"environment": environment(args, korch_bin), "args": {k: v for k, v in vars(args).items()
                                                                  if not k.startswith("peer")},
            "command": cmd, "load_before": [round(x, 2) for x in os.getloadavg()], "models": []}
    args.korch_sha = data["environment"]["korch_binary_sha256"]
    args.korch_commit = data["environment"]["korch_commit"]
    args.machine = machine_of(data["environment"])
    log("load average before: %s" % data["load_before"])
    old = []
    if args.merge and os.path.exists(os.path.join(args.out_dir, "benchmarks.json")):
        with open(os.path.join(args.out_dir, "benchmarks.json")) as f:
            prev = json.load(f)
        old = [m for m in prev.get("models", []) if m["model"] not in models]
        for m in old:  # which korch build measured it (older files have it only in the header)
            m.setdefault("korch_binary_sha256", prev.get("environment", {}).get("korch_binary_sha256"))
            m.setdefault("korch_commit", prev.get("environment", {}).get("korch_commit"))
            m.setdefault("machine", machine_of(prev.get("environment", {})))
    for name in models:
        log("=== %s" % name)
        if args.deadline and time.time() > args.deadline - args.model_reserve_s:
            log("%s: not run: the time given (--deadline) is used up" % name)
            data["models"].append({"model": name, "case": name + ("_tiny" if q else ""), "failures": [
                "not run: the time given to this run (--deadline) was used up before it"],
                "started": datetime.datetime.now().isoformat(timespec="seconds")})
            continue
        try:
            res = bench_model(args, name, korch_bin)
        except Exception as e:  # noqa: BLE001  one model's failure must not stop the others
            traceback.print_exc()
            res = {"model": name, "case": name + ("_tiny" if q else ""), "failures":
                   ["harness: %s: %s" % (type(e).__name__, e)],
                   "load_before": [round(x, 2) for x in os.getloadavg()],
                   "started": datetime.datetime.now().isoformat(timespec="seconds")}
        data["models"].append(res)
        e = res.get("engines", {})
        log("%s: %s" % (name, ", ".join("%s %s" % (k, fmt_ms(v.get("median_ms")) if v.get("median_ms") else
                                                   v.get("error", "-")) for k, v in e.items())))
        # write after every model so that an interrupted run still leaves its results
        data["load_after"] = [round(x, 2) for x in os.getloadavg()]
        partial = dict(data, models=sorted(old + data["models"], key=lambda m: ALL_MODELS.index(m["model"])),
                       merged=bool(old))
        render(partial, args.out_dir)
    log("load average after: %s" % data["load_after"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
