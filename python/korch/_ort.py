"""korch.InferenceSession: ONNX Runtime's session API over korch.Session.

Guarantees: code written for ``onnxruntime.InferenceSession`` runs unchanged after replacing the
class: the constructor takes a model path (or serialized model bytes), ``sess_options`` and
``providers`` (``sess_options.intra_op_num_threads`` > 0 sets the thread count; providers are
accepted and ignored: korch runs on its CPU backend); ``run(output_names, input_feed)`` returns a
list of numpy arrays in the order of ``output_names`` (all outputs for None); ``get_inputs()`` /
``get_outputs()`` return NodeArgs with ``.name``, ``.shape`` (list of ints), ``.type``
(``"tensor(float)"``...) and ``.dtype`` (numpy dtype). Unlike ONNX Runtime, shapes are static
(inputs must match the model's, or ``input_shapes=``), and inputs are never converted: a wrong
name raises KeyError, a wrong dtype or shape ValueError.
"""
import os
import tempfile
from pathlib import Path

import numpy as np

from . import _korch
from ._progress import make_progress

_ORT_TYPES = {
    "float32": "tensor(float)",
    "float64": "tensor(double)",
    "int64": "tensor(int64)",
    "int32": "tensor(int32)",
    "int8": "tensor(int8)",
    "uint8": "tensor(uint8)",
    "bool": "tensor(bool)",
}


class NodeArg:
    """An input or output of the model, as onnxruntime.NodeArg: name, shape, type, dtype."""

    def __init__(self, name, shape, dtype):
        self.name = name
        self.shape = list(shape)
        self.dtype = np.dtype(dtype)
        self.type = _ORT_TYPES[str(dtype)]

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class InferenceSession:
    """ONNX Runtime-shaped session: ``korch.InferenceSession(path).run(output_names, feeds)``.

    Keyword-only korch options: ``plan`` (a korch.Plan or plan file; default: optimise now),
    ``cost`` ("analytic", the default: seconds; "measured": kernels timed on this CPU, cached),
    ``cache`` (the profile cache file for measured costs), ``threads`` (default 2, or
    ``sess_options.intra_op_num_threads``), ``input_shapes`` (fixes dynamic dimensions),
    ``progress`` (as korch.compile's).
    """

    def __init__(
        self,
        path_or_bytes,
        sess_options=None,
        providers=None,
        provider_options=None,
        *,
        plan=None,
        cost="analytic",
        cache=None,
        threads=None,
        input_shapes=None,
        progress=None,
    ):
        if threads is None:
            threads = getattr(sess_options, "intra_op_num_threads", 0) or 2
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            with tempfile.TemporaryDirectory(prefix="korch-model-") as d:
                path = Path(d) / "model.onnx"
                path.write_bytes(bytes(path_or_bytes))
                self._open(path, plan, cost, cache, threads, input_shapes, progress)
            self._model_path = None
        else:
            self._open(Path(os.fspath(path_or_bytes)), plan, cost, cache, threads, input_shapes, progress)
            self._model_path = os.fspath(path_or_bytes)
        s = self.session
        self._inputs = [NodeArg(n, s.input_shapes[n], s.input_dtypes[n]) for n in s.input_names]
        self._outputs = [NodeArg(n, s.output_shapes[n], s.output_dtypes[n]) for n in s.output_names]

    def _open(self, path, plan, cost, cache, threads, input_shapes, progress):
        if plan is None and cost != "analytic":
            show = make_progress(progress)
            try:
                plan = _korch.optimize(
                    path,
                    threads=threads,
                    cost=cost,
                    cache=cache,
                    input_shapes=input_shapes,
                    progress=lambda line: show("korch: " + line),
                )
            finally:
                show.done()
        self.session = _korch.Session(path, plan, threads, input_shapes=input_shapes)

    @property
    def plan(self):
        return self.session.plan

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return ["CPUExecutionProvider"]

    def run(self, output_names, input_feed, run_options=None):
        """Outputs named by output_names (None: all, in the model's order) for the given inputs."""
        known = self.session.output_names
        if output_names is None:
            output_names = known
        elif isinstance(output_names, str):
            raise TypeError("output_names must be a list of names or None, not a str")
        for name in output_names:
            if name not in known:
                raise KeyError(f"unknown output '{name}'; the model's outputs are {known}")
        out = self.session.run(input_feed)
        return [out[name] for name in output_names]

    def __repr__(self):
        return f"<korch.InferenceSession inputs={self._inputs} outputs={self._outputs}>"
