"""Tests of the korch Python module.

Run from the repository root after building (see python/README.md):

    PYTHONPATH=build/python .venv/bin/python -m pytest python/tests -q

Tests that need onnx / onnxruntime (building small models, the ONNX Runtime oracle) are skipped
when those packages are missing.
"""
import ctypes
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import korch

ROOT = Path(os.environ.get("KORCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CASE = ROOT / "examples" / "tiny_cnn"
MODEL = CASE / "model.onnx"
ATOL, RTOL = 1e-4, 1e-3


def assert_close(actual, expected, what=""):
    """|a - b| <= 1e-4 + 1e-3 |b| elementwise (exact for integers and booleans)."""
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind in "fc":
        err = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        bound = ATOL + RTOL * np.abs(expected.astype(np.float64))
        assert np.all(err <= bound), f"{what}: max abs error {err.max()} (bound {bound[err > bound].min()})"
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


@pytest.fixture(scope="module")
def plan():
    return korch.optimize(MODEL)


@pytest.fixture(scope="module")
def session(plan):
    return korch.Session(MODEL, plan)


@pytest.fixture(scope="module")
def case_io():
    ds = CASE / "test_data_set_0"
    return korch.read_tensor(ds / "input_0.pb"), korch.read_tensor(ds / "output_0.pb")


@pytest.fixture(scope="module")
def other_model(tmp_path_factory):
    """A different small model (Relu) for the wrong-plan tests."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "other",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 32, 32])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("other") / "relu.onnx"
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def dtype_model(tmp_path_factory):
    """Float, int64 and bool inputs; float, int64 and bool outputs."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    zero = numpy_helper.from_array(np.zeros((), np.float32), "zero")
    nodes = [
        helper.make_node("ArgMax", ["x"], ["argmax"], axis=1, keepdims=1),
        helper.make_node("Greater", ["x", "zero"], ["positive"]),
        helper.make_node("Gather", ["x", "idx"], ["rows"], axis=0),
        helper.make_node("Where", ["mask", "x", "zero"], ["masked"]),
        helper.make_node("And", ["mask", "positive"], ["both"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dtypes",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, [4]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("argmax", TensorProto.INT64, [2, 1]),
            helper.make_tensor_value_info("positive", TensorProto.BOOL, [2, 3]),
            helper.make_tensor_value_info("rows", TensorProto.FLOAT, [4, 3]),
            helper.make_tensor_value_info("masked", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("both", TensorProto.BOOL, [2, 3]),
        ],
        initializer=[zero],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("dtypes") / "dtypes.onnx"
    onnx.save(model, str(path))
    return path


def test_import():
    assert issubclass(korch.Error, RuntimeError)
    assert korch.Error.__module__ == "korch" and korch.Plan.__module__ == "korch"
    assert korch.KorchError is korch.Error
    assert korch.__version__
    for name in korch.__all__:
        assert hasattr(korch, name), name


def test_optimize(plan):
    assert plan.strategy == "korch"
    assert plan.cost_model == "analytic"
    assert plan.kernels > 0
    assert plan.predicted_ms > 0
    assert len(plan.kernel_ops) == plan.kernels
    assert plan.input_shapes == {"input": (1, 3, 32, 32)}
    assert set(plan.baselines) == {"greedy", "per-op", "per-primitive"}
    for name, baseline in plan.baselines.items():
        assert baseline.strategy == name
        assert baseline.kernels >= plan.kernels
        # The optimum is never worse than a baseline under the same cost model.
        assert plan.predicted_ms <= baseline.predicted_ms * (1 + 1e-9)
    assert plan.stats["all_optimal"] is True
    assert plan.stats["candidates"] > 0
    text = plan.summary()
    assert "korch" in text and "greedy" in text and f"{plan.kernels} kernels" in text
    assert len(plan.summary(kernels=False).splitlines()) < len(text.splitlines())
    assert "korch.Plan" in repr(plan)


def test_optimize_options(plan):
    small = korch.optimize(str(MODEL), threads=1, max_kernel_prims=1)
    # Single primitives (plus the baseline kernels) only: never better than the default search.
    assert small.kernels > 0
    assert small.predicted_ms >= plan.predicted_ms * (1 - 1e-9)
    assert small.predicted_ms <= small.baselines["greedy"].predicted_ms * (1 + 1e-9)
    shaped = korch.optimize(MODEL, input_shapes={"input": [1, 3, 32, 32]})
    assert shaped.kernels > 0


def test_optimize_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="cost model"):
        korch.optimize(MODEL, cost="fastest")
    with pytest.raises(ValueError, match="threads"):
        korch.optimize(MODEL, threads=0)
    with pytest.raises(ValueError, match="max_kernel_prims"):
        korch.optimize(MODEL, max_kernel_prims=0)
    with pytest.raises(RuntimeError) as e:
        korch.optimize(tmp_path / "missing.onnx")
    assert isinstance(e.value, korch.Error)
    assert "missing.onnx" in str(e.value) and "\n" not in str(e.value)


def test_optimize_measured(tmp_path):
    cache = tmp_path / "profiles.sqlite"
    cache.write_bytes(b"this is not a SQLite database")
    with pytest.warns(RuntimeWarning, match="korch: "):  # the damaged cache is moved aside and rebuilt
        plan = korch.optimize(MODEL, cost="measured", cache=cache)
    assert list(tmp_path.glob("profiles.sqlite.corrupt-*"))
    assert plan.strategy == "korch"
    assert plan.kernels > 0 and plan.predicted_ms > 0
    assert plan.stats["cache"] == str(cache)
    assert plan.stats["measured"] > 0 and plan.stats["compiled_now"] > 0
    # Second run: every measurement comes from the cache.
    again = korch.optimize(MODEL, cost="measured", cache=cache)
    assert again.stats["compiled_now"] == 0 and again.stats["cache_hits"] > 0
    assert again.kernels == plan.kernels
    out = korch.Session(MODEL, again).run({"input": np.ones((1, 3, 32, 32), np.float32)})
    assert out["output"].shape == (1, 10)


def test_session_properties(session, plan):
    assert session.input_names == ["input"]
    assert session.output_names == ["output"]
    assert session.input_shapes == {"input": (1, 3, 32, 32)}
    assert session.input_dtypes == {"input": "float32"}
    assert session.output_shapes == {"output": (1, 10)}
    assert session.output_dtypes == {"output": "float32"}
    assert session.threads == 2
    assert session.plan.kernels == plan.kernels


def test_run_matches_test_case(session, case_io):
    x, expected = case_io
    out = session.run({"input": x})
    assert list(out) == ["output"]
    assert_close(out["output"], expected, "tiny_cnn output_0")


def test_read_tensor_matches_onnx(case_io):
    numpy_helper = pytest.importorskip("onnx.numpy_helper")
    onnx = pytest.importorskip("onnx")
    x, y = case_io
    for path, mine in [("input_0.pb", x), ("output_0.pb", y)]:
        proto = onnx.TensorProto()
        proto.ParseFromString((CASE / "test_data_set_0" / path).read_bytes())
        np.testing.assert_array_equal(mine, numpy_helper.to_array(proto))


def test_run_matches_onnxruntime(session):
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for _ in range(2):
        x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
        (expected,) = ref.run(None, {"input": x})
        assert_close(session.run({"input": x})["output"], expected, "tiny_cnn vs onnxruntime")


def test_default_session_optimizes(case_io):
    x, expected = case_io
    sess = korch.Session(MODEL)  # plan=None: optimize now, analytic costs
    assert sess.plan.strategy == "korch" and sess.plan.cost_model == "analytic"
    assert_close(sess.run({"input": x})["output"], expected, "default session")


def test_baseline_plan_runs(plan, case_io):
    x, expected = case_io
    sess = korch.Session(MODEL, plan.baselines["greedy"], threads=1)
    assert_close(sess.run({"input": x})["output"], expected, "greedy plan")


def test_input_validation(session):
    good = np.zeros((1, 3, 32, 32), np.float32)
    with pytest.raises(KeyError, match="unknown input 'image'"):
        session.run({"image": good})
    with pytest.raises(KeyError, match="unknown input"):
        session.run({"input": good, "extra": good})
    with pytest.raises(KeyError, match="missing input 'input'"):
        session.run({})
    with pytest.raises(ValueError, match=r"must be float32\[1,3,32,32\], got float32\[1,3,16,16\]"):
        session.run({"input": np.zeros((1, 3, 16, 16), np.float32)})
    with pytest.raises(ValueError, match="got float32"):
        session.run({"input": np.zeros((3, 32, 32), np.float32)})
    with pytest.raises(ValueError, match=r"astype\(numpy.float32\)"):
        session.run({"input": good.astype(np.float64)})
    with pytest.raises(ValueError):
        session.run({"input": good.astype(">f4")})  # non-native byte order
    with pytest.raises(TypeError):
        session.run([good])
    with pytest.raises(TypeError):
        session.run({0: good})
    # A non-contiguous view of the right dtype and shape is accepted.
    wide = np.zeros((1, 3, 32, 64), np.float32)
    assert session.run({"input": wide[..., ::2]})["output"].shape == (1, 10)


def build_package(pkg, build):
    """Configure and build an exported package's shared library; returns its path."""
    if not shutil.which("cmake"):
        pytest.skip("cmake is needed to build an exported package")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    for cmd in (["cmake", "-S", str(pkg), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", *gen],
                ["cmake", "--build", str(build), "--target", "korch_model", "-j", "2"]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return build / "libkorch_model.so"


class ExportedModel:
    """The exported package's C API (include/korch_model.h) through ctypes."""

    def __init__(self, so, pkg, threads):
        lib = self.lib = ctypes.CDLL(str(so))
        lib.korch_create.restype = ctypes.c_void_p
        lib.korch_create.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        for f in ("korch_num_inputs", "korch_num_outputs"):
            getattr(lib, f).argtypes = [ctypes.c_void_p]
        for f in ("korch_input_name", "korch_output_name"):
            getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_int]
            getattr(lib, f).restype = ctypes.c_char_p
        for f in ("korch_input_bytes", "korch_output_bytes"):
            getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_int]
            getattr(lib, f).restype = ctypes.c_int64
        lib.korch_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        lib.korch_last_error.argtypes = [ctypes.c_void_p]
        lib.korch_last_error.restype = ctypes.c_char_p
        lib.korch_destroy.argtypes = [ctypes.c_void_p]
        err = ctypes.create_string_buffer(512)
        self.m = lib.korch_create(str(pkg).encode(), threads, err, len(err))
        assert self.m, f"korch_create: {err.value.decode()}"

    def names(self, kind):
        n = getattr(self.lib, f"korch_num_{kind}s")(self.m)
        return [getattr(self.lib, f"korch_{kind}_name")(self.m, i).decode() for i in range(n)]

    def run(self, inputs):
        """inputs: contiguous numpy arrays in declaration order; returns the raw bytes of each output."""
        assert len(inputs) == len(self.names("input"))
        for i, a in enumerate(inputs):
            assert a.flags.c_contiguous and a.nbytes == self.lib.korch_input_bytes(self.m, i), f"input {i}"
        ins = (ctypes.c_void_p * len(inputs))(*[a.ctypes.data for a in inputs])
        outs = [ctypes.create_string_buffer(self.lib.korch_output_bytes(self.m, i))
                for i in range(len(self.names("output")))]
        out_ptrs = (ctypes.c_void_p * len(outs))(*[ctypes.addressof(b) for b in outs])
        assert self.lib.korch_run(self.m, ins, out_ptrs) == 0, self.lib.korch_last_error(self.m).decode()
        return [b.raw for b in outs]

    def close(self):
        self.lib.korch_destroy(self.m)


def test_export_builds_and_matches_session(plan, case_io, tmp_path, monkeypatch):
    """korch.export writes the package `korch export` writes; built and run through its C API, it
    gives korch.Session's outputs bit for bit (same plan, threads and strict_float Halide target on
    both sides: JIT and AOT code may otherwise reassociate float sums differently)."""
    monkeypatch.setenv("HL_JIT_TARGET", "host-strict_float")
    x, expected = case_io
    pkg = tmp_path / "pkg"
    summary = korch.export(plan, pkg, threads=2)
    assert summary["kernels"] == plan.kernels
    assert summary["halide_kernels"] + summary["onednn_kernels"] + summary["reference_kernels"] == plan.kernels
    assert summary["weight_bytes"] > 0 and summary["cpu_features"]
    for f in ("model.kpkg", "weights.bin", "CMakeLists.txt", "include/korch_model.h"):
        assert (pkg / f).is_file(), f"package lacks {f}"
    so = build_package(pkg, tmp_path / "build")
    exported = ExportedModel(so, pkg, threads=2)
    try:
        assert exported.names("input") == ["input"] and exported.names("output") == ["output"]
        (raw,) = exported.run([np.ascontiguousarray(x)])
    finally:
        exported.close()
    got = np.frombuffer(raw, np.float32).reshape(expected.shape)
    mine = korch.Session(MODEL, plan, threads=2).run({"input": x})["output"]
    assert got.tobytes() == mine.tobytes(), f"exported vs Session: max abs {np.abs(got - mine).max()}"
    assert_close(got, expected, "exported package vs test case")


def test_export_bad_arguments(plan, tmp_path):
    with pytest.raises(ValueError, match="threads"):
        korch.export(plan, tmp_path / "p", threads=0)
    with pytest.raises(TypeError):
        korch.export("plan.json", tmp_path / "p")  # a Plan object, not a path
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(korch.Error, match="cannot create folder"):
        korch.export(plan, blocker / "pkg")


def test_plan_save_load_roundtrip(plan, tmp_path, case_io):
    x, expected = case_io
    path = tmp_path / "plan.json"
    plan.save(path)
    assert path.exists()
    with pytest.raises(RuntimeError, match="cannot write"):
        plan.save(tmp_path / "no_such_dir" / "plan.json")
    loaded = korch.load_plan(MODEL, path)
    assert loaded.strategy == plan.strategy
    assert loaded.kernels == plan.kernels
    assert loaded.kernel_ops == plan.kernel_ops
    assert loaded.predicted_ms == pytest.approx(plan.predicted_ms, rel=1e-9)
    assert loaded.baselines == {}
    assert loaded.stats is None
    assert '"graph_hash"' in loaded.to_json()
    assert_close(korch.Session(MODEL, loaded).run({"input": x})["output"], expected, "loaded plan")
    # A plan file path works too.
    assert_close(korch.Session(MODEL, str(path)).run({"input": x})["output"], expected, "plan file")
    # An analytic plan names no code generator; a measured plan names the backend's, which travels
    # with the plan, and a plan naming another one is warned about.
    assert plan.codegen == "" and loaded.codegen == plan.codegen
    foreign = tmp_path / "foreign.json"
    foreign_json = json.loads(path.read_text())
    foreign_json["codegen"] = "korch-codegen-0"
    foreign.write_text(json.dumps(foreign_json))
    with pytest.warns(RuntimeWarning, match="korch-codegen-0"):
        assert korch.load_plan(MODEL, foreign).codegen == "korch-codegen-0"


def test_plan_for_other_model(plan, other_model, tmp_path):
    path = tmp_path / "plan.json"
    plan.save(path)
    with pytest.raises(RuntimeError, match="different model"):
        korch.load_plan(other_model, path)
    with pytest.raises(RuntimeError, match="different model"):
        korch.Session(other_model, plan)
    with pytest.raises(RuntimeError, match="different model"):
        korch.Session(other_model, path)
    with pytest.raises(RuntimeError):
        korch.load_plan(MODEL, tmp_path / "no_such_plan.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(korch.Error):
        korch.load_plan(MODEL, bad)
    with pytest.raises(TypeError):
        korch.Session(MODEL, plan=42)


def test_other_model_runs(other_model):
    sess = korch.Session(other_model, threads=1)
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.testing.assert_array_equal(sess.run({"x": x})["y"], np.maximum(x, 0))


def test_dtypes_match_onnxruntime(dtype_model):
    ort = pytest.importorskip("onnxruntime")
    sess = korch.Session(dtype_model, threads=1)
    assert sess.input_dtypes == {"x": "float32", "idx": "int64", "mask": "bool"}
    assert sess.output_dtypes == {
        "argmax": "int64",
        "positive": "bool",
        "rows": "float32",
        "masked": "float32",
        "both": "bool",
    }
    rng = np.random.default_rng(2)
    feeds = {
        "x": rng.standard_normal((2, 3)).astype(np.float32),
        "idx": np.array([1, 0, 1, 1], np.int64),
        "mask": rng.random((2, 3)) < 0.5,
    }
    out = sess.run(feeds)
    ref = ort.InferenceSession(str(dtype_model), providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
    assert list(out) == list(expected)
    for name in expected:
        assert_close(out[name], expected[name], name)
    with pytest.raises(ValueError, match=r"must be int64\[4\], got int32\[4\]"):
        sess.run({**feeds, "idx": feeds["idx"].astype(np.int32)})
    with pytest.raises(ValueError, match="astype"):
        sess.run({**feeds, "mask": feeds["mask"].astype(np.uint8)})


def test_concurrent_runs(session, case_io):
    """Runs from several Python threads (the GIL is released while running) give the same result."""
    x, expected = case_io
    results, errors = [], []

    def work():
        try:
            for _ in range(3):
                results.append(session.run({"input": x})["output"])
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 9
    for r in results:
        assert_close(r, expected, "concurrent run")
