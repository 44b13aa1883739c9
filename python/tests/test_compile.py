"""Tests of korch.compile (PyTorch module -> korch plan -> callable), korch.load and the compile cache.

Models are small and use analytic costs (seconds each); one test uses measured costs on a
two-operator module. The measured ResNet-18 / TransformerEncoder acceptance check is
bench/python_compile.py (minutes). Skipped without torch.
"""
import os
import time

import numpy as np
import pytest

import korch

torch = pytest.importorskip("torch")
nn = torch.nn


def small_encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2).eval()


class Structured(nn.Module):
    """Two inputs; a dict holding a tensor, a tuple and a list."""

    def forward(self, a, b):
        return {"sum": a + b, "rest": (a * b, [torch.relu(a - b)])}


class Tokens(nn.Module):
    """int64 token ids -> embeddings -> a linear layer."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.fc = nn.Linear(16, 8)

    def forward(self, ids):
        return self.fc(self.emb(ids))


def reference(module, *inputs):
    with torch.no_grad():
        return module(*inputs)


def test_torchvision_resnet18_matches_pytorch(cache_dir, whole_model_close):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    compiled = korch.compile(model, (x,), cost="analytic", cache=cache_dir)
    y = compiled(x)
    assert isinstance(y, torch.Tensor)
    whole_model_close(y, reference(model, x), "resnet18")
    assert compiled.input_names == ["x"] and compiled.input_shapes == {"x": (1, 3, 64, 64)}


def test_transformer_encoder_matches_pytorch(cache_dir, whole_model_close):
    model = small_encoder()
    x = torch.randn(2, 10, 32)
    compiled = korch.compile(model, x, cost="analytic", cache=cache_dir)
    whole_model_close(compiled(x), reference(model, x), "encoder")
    whole_model_close(compiled(x.numpy()), reference(model, x).numpy(), "encoder, numpy in")


def test_second_compile_loads_the_cached_plan(cache_dir, whole_model_close):
    model = small_encoder()
    x = torch.randn(1, 8, 32)
    first = korch.compile(model, x, cost="analytic", cache=cache_dir)
    assert not first.from_cache
    assert sorted(p.name for p in first.path.iterdir()) == ["korch_compiled.json", "model.onnx", "plan.json"]
    second = korch.compile(model, x, cost="analytic", cache=cache_dir)
    assert second.from_cache and second.path == first.path
    assert second.plan.kernel_ops == first.plan.kernel_ops
    whole_model_close(second(x), reference(model, x))
    # Other settings or other weights are another entry.
    assert not korch.compile(model, x, cost="analytic", cache=cache_dir, threads=1).from_cache
    with torch.no_grad():
        model.layers[0].linear1.weight.add_(0.01)
    changed = korch.compile(model, x, cost="analytic", cache=cache_dir)
    assert not changed.from_cache
    whole_model_close(changed(x), reference(model, x))


def test_damaged_cached_plan_is_optimised_again(cache_dir):
    model = Tokens().eval()
    ids = torch.tensor([[1, 2, 3]])
    first = korch.compile(model, ids, cost="analytic", cache=cache_dir)
    (first.path / "plan.json").write_text("{not json")
    with pytest.warns(UserWarning, match="cannot be used"):
        again = korch.compile(model, ids, cost="analytic", cache=cache_dir)
    assert not again.from_cache
    torch.testing.assert_close(again(ids), reference(model, ids), atol=1e-4, rtol=1e-4)


def test_structured_outputs_and_several_inputs(cache_dir):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    compiled = korch.compile(Structured(), (a, b), cost="analytic", cache=cache_dir)
    out, ref = compiled(a, b), Structured()(a, b)
    assert set(out) == {"sum", "rest"} and isinstance(out["rest"], tuple) and isinstance(out["rest"][1], list)
    torch.testing.assert_close(out["sum"], ref["sum"])
    torch.testing.assert_close(out["rest"][0], ref["rest"][0])
    torch.testing.assert_close(out["rest"][1][0], ref["rest"][1][0])
    as_numpy = compiled(a.numpy(), b.numpy())
    assert isinstance(as_numpy["sum"], np.ndarray)
    assert compiled.input_names == ["a", "b"]


def test_int64_inputs(cache_dir):
    model = Tokens().eval()
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    compiled = korch.compile(model, (ids,), cost="analytic", cache=cache_dir)
    torch.testing.assert_close(compiled(ids), reference(model, ids), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match=r"is float32, but the module was compiled for int64"):
        compiled(ids.float())


def test_bad_inputs_raise_clear_errors(cache_dir):
    model = small_encoder()
    x = torch.randn(1, 8, 32)
    compiled = korch.compile(model, x, cost="analytic", cache=cache_dir)
    with pytest.raises(ValueError, match=r"has shape \(1, 9, 32\), but the module was compiled for \(1, 8, 32\)"):
        compiled(torch.randn(1, 9, 32))
    with pytest.raises(ValueError, match="float64"):
        compiled(x.double())
    with pytest.raises(TypeError, match="compiled for 1 input"):
        compiled(x, x)
    with pytest.raises(TypeError, match="torch.Tensor or numpy.ndarray"):
        compiled([[1.0]])
    with pytest.raises(TypeError, match="positional inputs only"):
        compiled(src=x)
    # A tensor that requires grad is accepted (its value is used).
    assert compiled(x.clone().requires_grad_()).shape == (1, 8, 32)


def test_bad_arguments(cache_dir):
    x = torch.randn(2, 3)
    with pytest.raises(TypeError, match="torch.nn.Module"):
        korch.compile(lambda t: t, (x,), cache=cache_dir)
    with pytest.raises(TypeError, match="example_inputs"):
        korch.compile(nn.ReLU(), 3.0, cache=cache_dir)
    with pytest.raises(TypeError, match="float16"):
        korch.compile(nn.ReLU(), x.half(), cache=cache_dir)
    with pytest.raises(ValueError, match="unknown cost model"):
        korch.compile(nn.ReLU(), x, cost="fast", cache=cache_dir)
    with pytest.raises(ValueError, match="threads"):
        korch.compile(nn.ReLU(), x, threads=0, cache=cache_dir)
    with pytest.raises(TypeError, match="must return a tensor"):
        korch.compile(NoneOut(), x, cost="analytic", cache=cache_dir)


class NoneOut(nn.Module):
    def forward(self, x):
        return x + 1, None


class Unique(nn.Module):
    def forward(self, x):
        return torch.unique(x)  # a data-dependent output shape


class Fft(nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real


def test_unsupported_modules_raise_korch_error(cache_dir):
    x = torch.randn(8)
    with pytest.raises(korch.Error, match="operator Unique is not supported"):
        korch.compile(Unique(), x, cost="analytic", cache=cache_dir)
    with pytest.raises(korch.Error, match="torch.onnx.export cannot export"):
        korch.compile(Fft(), x, cost="analytic", cache=cache_dir)
    # A failed compile leaves no entry behind.
    assert not any((cache_dir / "compiled").iterdir())


def test_training_mode_module_is_compiled_in_eval_mode(cache_dir, whole_model_close):
    model = small_encoder().train()
    x = torch.randn(1, 8, 32)
    with pytest.warns(UserWarning, match="training mode"):
        compiled = korch.compile(model, x, cost="analytic", cache=cache_dir)
    assert model.training  # left as it was
    whole_model_close(compiled(x), reference(model.eval(), x))


def test_save_and_load(cache_dir, tmp_path, whole_model_close):
    model = small_encoder()
    x = torch.randn(1, 8, 32)
    compiled = korch.compile(model, x, cost="analytic", cache=cache_dir)
    saved = compiled.save(tmp_path / "saved")
    loaded = korch.load(saved)
    assert loaded.from_cache and loaded.plan.kernels == compiled.plan.kernels
    out = loaded(x.numpy())
    assert isinstance(out, np.ndarray)
    whole_model_close(out, reference(model, x).numpy())
    whole_model_close(loaded(x), reference(model, x))
    with pytest.raises(korch.Error, match="no valid korch_compiled.json"):
        korch.load(tmp_path)


def test_measured_costs_show_progress(cache_dir, whole_model_close):
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU()).eval()
    x = torch.randn(4, 16)
    lines = []
    start = time.monotonic()
    compiled = korch.compile(model, x, cost="measured", cache=cache_dir, progress=lines.append)
    cold = time.monotonic() - start
    assert any(line.startswith("korch: profiling:") for line in lines), lines
    assert (cache_dir / "profiles.sqlite").is_file()
    assert compiled.plan.cost_model.startswith("measured")
    whole_model_close(compiled(x), reference(model, x))
    lines.clear()
    warm = korch.compile(model, x, cost="measured", cache=cache_dir, progress=lines.append)
    assert warm.from_cache and lines == ["korch: running and exporting Sequential to ONNX (opset 17)",
                                         "korch: loading the cached plan"]
    assert warm.seconds < cold + 1


def test_progress_line_on_stderr(cache_dir, capsys):
    model = nn.Sequential(nn.Linear(4, 4)).eval()
    korch.compile(model, torch.randn(1, 4), cost="analytic", cache=cache_dir, progress=True)
    assert "korch: optimising (analytic costs)" in capsys.readouterr().err
    korch.compile(model, torch.randn(1, 4), cost="analytic", cache=cache_dir, progress=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress"):
        korch.compile(model, torch.randn(1, 4), cost="analytic", cache=cache_dir, progress="yes")


def test_default_cache_is_korch_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KORCH_CACHE_DIR", str(tmp_path / "user-cache"))
    compiled = korch.compile(nn.Sequential(nn.Linear(4, 2)).eval(), torch.randn(1, 4), cost="analytic")
    assert compiled.path.parent == tmp_path / "user-cache" / "compiled"
    assert os.path.dirname(korch.default_cache_path()) == str(tmp_path / "user-cache")


class Stop(Exception):
    pass


def test_progress_exception_ends_the_optimisation(cache_dir):
    def stop(line):
        if line.startswith("korch: profiling:"):
            raise Stop(line)

    with pytest.raises(Stop):
        korch.compile(nn.Sequential(nn.Linear(8, 8), nn.Tanh()).eval(), torch.randn(2, 8), cost="measured",
                      cache=cache_dir, progress=stop)
    assert not any((cache_dir / "compiled").iterdir())  # no entry is left behind
    with pytest.raises(TypeError, match="progress must be a callable"):
        korch.optimize(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tiny_cnn", "model.onnx"),
                       progress=3)
