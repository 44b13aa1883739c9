"""Shared fixtures of the korch Python tests.

``whole_model_close(actual, expected)``: the project's whole-model tolerance against a reference
(PyTorch, ONNX Runtime): |a - b| <= 1e-3 + 1e-3 |b| elementwise, shapes and dtypes equal.
``cache_dir``: a fresh folder for korch.compile's cache (plans and measured costs).
"""
import numpy as np
import pytest

WHOLE_MODEL_ATOL, WHOLE_MODEL_RTOL = 1e-3, 1e-3


def _as_numpy(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


@pytest.fixture
def whole_model_close():
    def check(actual, expected, what=""):
        a, b = _as_numpy(actual), _as_numpy(expected)
        assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} != {b.dtype}"
        assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
        err = np.abs(a.astype(np.float64) - b.astype(np.float64))
        bound = WHOLE_MODEL_ATOL + WHOLE_MODEL_RTOL * np.abs(b.astype(np.float64))
        assert np.all(err <= bound), f"{what}: max abs error {err.max()}"
        return float(err.max()) if err.size else 0.0

    return check


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "korch-cache"
