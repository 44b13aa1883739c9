"""Tests of korch.InferenceSession, the ONNX Runtime-shaped API: the same calls as
onnxruntime.InferenceSession give the same names, shapes, types and (within the whole-model
tolerance) outputs. The ONNX Runtime comparisons are skipped without onnxruntime.
"""
import os
import types
from pathlib import Path

import numpy as np
import pytest

import korch

ROOT = Path(os.environ.get("KORCH_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CASE = ROOT / "examples" / "tiny_cnn"
MODEL = CASE / "model.onnx"


@pytest.fixture(scope="module")
def sess():
    return korch.InferenceSession(str(MODEL))


@pytest.fixture(scope="module")
def case_io():
    ds = CASE / "test_data_set_0"
    return korch.read_tensor(ds / "input_0.pb"), korch.read_tensor(ds / "output_0.pb")


def test_inputs_and_outputs(sess):
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert (inp.name, inp.shape, inp.type, inp.dtype) == ("input", [1, 3, 32, 32], "tensor(float)", np.float32)
    assert (out.name, out.shape, out.type) == ("output", [1, 10], "tensor(float)")
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "input" in repr(sess)


def test_run_matches_the_case(sess, case_io, whole_model_close):
    x, expected = case_io
    (y,) = sess.run(None, {"input": x})
    whole_model_close(y, expected)
    (y2,) = sess.run(["output"], {"input": x})
    np.testing.assert_array_equal(y, y2)


def test_same_as_onnxruntime(sess, case_io, whole_model_close):
    ort = pytest.importorskip("onnxruntime")
    ref = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    for ours, theirs in ((sess.get_inputs(), ref.get_inputs()), (sess.get_outputs(), ref.get_outputs())):
        assert [(a.name, a.shape, a.type) for a in ours] == [(b.name, b.shape, b.type) for b in theirs]
    x, _ = case_io
    feeds = {ref.get_inputs()[0].name: x}
    whole_model_close(sess.run(None, feeds)[0], ref.run(None, feeds)[0])


def test_bytes_options_and_providers(case_io, whole_model_close):
    x, expected = case_io
    options = types.SimpleNamespace(intra_op_num_threads=1)
    s = korch.InferenceSession(MODEL.read_bytes(), options, providers=["CPUExecutionProvider"])
    assert s.session.threads == 1
    whole_model_close(s.run(None, {"input": x})[0], expected)


def test_plan_file(tmp_path, case_io, whole_model_close):
    plan = korch.optimize(MODEL)
    plan.save(tmp_path / "plan.json")
    s = korch.InferenceSession(MODEL, plan=tmp_path / "plan.json")
    assert s.plan.kernels == plan.kernels
    x, expected = case_io
    whole_model_close(s.run(None, {"input": x})[0], expected)


def test_measured_costs(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
        "relu_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "relu_add.onnx"))
    lines = []
    s = korch.InferenceSession(
        tmp_path / "relu_add.onnx", cost="measured", cache=tmp_path / "profiles.sqlite", progress=lines.append
    )
    assert s.plan.cost_model.startswith("measured") and any("profiling:" in line for line in lines)
    x = np.linspace(-1, 1, 256, dtype=np.float32).reshape(4, 64)
    np.testing.assert_allclose(s.run(["y"], {"x": x})[0], np.maximum(x, 0) + x, rtol=1e-6)


def test_bad_calls(sess, case_io):
    x, _ = case_io
    with pytest.raises(KeyError, match="unknown output 'nope'"):
        sess.run(["nope"], {"input": x})
    with pytest.raises(TypeError, match="list of names"):
        sess.run("output", {"input": x})
    with pytest.raises(KeyError, match="missing input 'input'"):
        sess.run(None, {})
    with pytest.raises(ValueError, match="must be float32"):
        sess.run(None, {"input": x.astype(np.float64)})
    with pytest.raises(korch.Error):
        korch.InferenceSession(str(CASE / "no_such_model.onnx"))
