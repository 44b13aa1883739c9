"""korch.compile: a PyTorch module -> a callable running korch's optimised plan on the CPU.

Guarantees:
  * compile() exports the module with torch.onnx.export (static shapes from the example inputs,
    eval mode), optimises the ONNX model, compiles every kernel once, and returns a
    CompiledModule that takes the module's positional inputs (torch tensors or numpy arrays) and
    returns its outputs with the module's structure (a tensor, or tuples / lists / str-keyed
    dicts of tensors): torch tensors when any input is one, numpy arrays otherwise.
  * An input of another shape, dtype, kind or count raises ValueError / TypeError naming the
    input and what was compiled; nothing is converted silently.
  * Every compile is stored in the cache folder (compiled/<key>/: model.onnx, plan.json,
    korch_compiled.json, the last written when the rest is complete), keyed by the exported
    ONNX bytes and the settings; a second compile of the same module loads the stored plan
    instead of optimising again. Measured costs use the profile cache in the same folder.
  * CompiledModule.save(dir) writes the same three files; korch.load(dir) runs them again
    without torch (numpy in, numpy out) or optimising.
"""
import hashlib
import inspect
import io
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from . import _korch
from ._progress import make_progress

_FORMAT = 1
_MODEL = "model.onnx"
_PLAN = "plan.json"
_META = "korch_compiled.json"
_DTYPES = ("float32", "float64", "int64", "int32", "int8", "uint8", "bool")


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            "korch.compile needs PyTorch (pip install torch; Debian's python3-torch is visible in a venv "
            "made with --system-site-packages)"
        ) from e
    return torch


def cache_paths(cache):
    """(folder, profile cache file) for compile()'s ``cache=`` argument: None is korch's user cache
    (the folder of korch.default_cache_path(), honouring KORCH_CACHE_DIR)."""
    if cache is None:
        profiles = Path(_korch.default_cache_path())
        return profiles.parent, profiles
    root = Path(os.fspath(cache))
    return root, root / "profiles.sqlite"


# ---------------------------------------------------------------------------------------------
# Inputs and outputs


def _flatten_inputs(example_inputs, torch):
    """example_inputs -> list of torch tensors (a tensor, a numpy array, or a tuple / list of them)."""
    if isinstance(example_inputs, (torch.Tensor, np.ndarray)):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)) or not example_inputs:
        raise TypeError(
            "korch.compile: example_inputs must be a tensor or a non-empty tuple of tensors (the module's "
            f"positional inputs), got {type(example_inputs).__name__}"
        )
    tensors = []
    for i, x in enumerate(example_inputs):
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(np.ascontiguousarray(x))
        if not isinstance(x, torch.Tensor):
            raise TypeError(
                f"korch.compile: example input {i} must be a torch.Tensor or numpy.ndarray, got "
                f"{type(x).__name__} (non-tensor arguments are not supported)"
            )
        dtype = str(x.dtype).replace("torch.", "")
        if dtype not in _DTYPES:
            raise TypeError(
                f"korch.compile: example input {i} is {dtype}; korch runs {', '.join(_DTYPES)} tensors"
            )
        if x.device.type != "cpu":
            raise ValueError(f"korch.compile: example input {i} is on {x.device}; korch runs on the CPU")
        tensors.append(x.detach())
    return tensors


def _flatten_outputs(out, torch, leaves):
    """Appends the tensors of `out` to `leaves`; returns its structure (JSON-serialisable)."""
    if isinstance(out, torch.Tensor):
        leaves.append(out)
        return "tensor"
    if isinstance(out, (tuple, list)):
        return {
            "type": "list" if isinstance(out, list) else "tuple",
            "items": [_flatten_outputs(o, torch, leaves) for o in out],
        }
    if isinstance(out, dict):
        for k in out:
            if not isinstance(k, str):
                raise TypeError(f"korch.compile: the module returns a dict with a non-str key {k!r}")
        return {"type": "dict", "keys": list(out), "items": [_flatten_outputs(v, torch, leaves) for v in out.values()]}
    raise TypeError(
        "korch.compile: the module must return a tensor, or tuples / lists / str-keyed dicts of tensors; "
        f"it returned a {type(out).__name__}"
    )


def _unflatten(spec, leaves):
    if spec == "tensor":
        return next(leaves)
    items = [_unflatten(s, leaves) for s in spec["items"]]
    if spec["type"] == "dict":
        return dict(zip(spec["keys"], items))
    return items if spec["type"] == "list" else tuple(items)


def _input_names(module, n):
    """forward()'s positional parameter names when there are n of them, else input_0..input_{n-1}."""
    names = []
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params[:n]:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    if len(names) != n or len(set(names)) != n or any(x.startswith("output_") for x in names):
        names = [f"input_{i}" for i in range(n)]
    return names


# ---------------------------------------------------------------------------------------------
# The compiled module


class CompiledModule:
    """A module compiled by korch.compile (or loaded by korch.load): call it like the module.

    ``.session`` (the korch.Session running the plan), ``.plan``, ``.path`` (the folder with
    model.onnx, plan.json and korch_compiled.json), ``.input_names``, ``.input_shapes``,
    ``.input_dtypes``, ``.output_names``, ``.from_cache`` (the plan was loaded, not optimised),
    ``.seconds`` (compile or load time), ``.save(dir)``.
    """

    def __init__(self, session, meta, path, from_cache, seconds):
        self.session = session
        self.path = Path(path)
        self.from_cache = from_cache
        self.seconds = seconds
        self._meta = meta
        self._inputs = [(i["name"], tuple(i["shape"]), np.dtype(i["dtype"])) for i in meta["inputs"]]
        self._output_spec = meta["output_structure"]
        self._session_inputs = set(session.input_names)
        missing = self._session_inputs - {name for name, _, _ in self._inputs}
        if missing or len(session.output_names) != len(meta["outputs"]):
            raise _korch.Error(
                f"korch: {self.path} does not match its model (inputs {sorted(missing)} unknown, "
                f"{len(session.output_names)} outputs for {len(meta['outputs'])} recorded)"
            )

    @property
    def plan(self):
        return self.session.plan

    @property
    def input_names(self):
        return [name for name, _, _ in self._inputs]

    @property
    def input_shapes(self):
        return {name: shape for name, shape, _ in self._inputs}

    @property
    def input_dtypes(self):
        return {name: str(dtype) for name, _, dtype in self._inputs}

    @property
    def output_names(self):
        return list(self._meta["outputs"])

    def _array(self, i, x):
        name, shape, dtype = self._inputs[i]
        torch = sys.modules.get("torch")
        is_torch = torch is not None and isinstance(x, torch.Tensor)
        if is_torch:
            if x.device.type != "cpu":
                raise ValueError(f"input {i} ('{name}') is on {x.device}; korch runs on the CPU (use .cpu())")
            got_dtype = str(x.dtype).replace("torch.", "")
            got_shape = tuple(x.shape)
        elif isinstance(x, np.ndarray):
            got_dtype, got_shape = str(x.dtype), x.shape
        else:
            raise TypeError(f"input {i} ('{name}') must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
        if got_shape != shape:
            raise ValueError(
                f"input {i} ('{name}') has shape {got_shape}, but the module was compiled for {shape}: korch "
                "plans are for static shapes; compile again with an example input of this shape"
            )
        if got_dtype != str(dtype):
            raise ValueError(f"input {i} ('{name}') is {got_dtype}, but the module was compiled for {dtype}")
        return (x.detach().numpy() if is_torch else x), is_torch

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"a compiled module takes positional inputs only, got keywords {sorted(kwargs)}")
        if len(args) != len(self._inputs):
            raise TypeError(
                f"the module was compiled for {len(self._inputs)} input(s) ({', '.join(self.input_names)}), "
                f"got {len(args)}"
            )
        feeds, as_torch = {}, False
        for i, x in enumerate(args):
            arr, is_torch = self._array(i, x)
            as_torch = as_torch or is_torch
            if self._inputs[i][0] in self._session_inputs:  # the exporter drops unused inputs
                feeds[self._inputs[i][0]] = arr
        out = self.session.run(feeds)
        flat = [out[name] for name in self.session.output_names]
        if as_torch:
            torch = sys.modules["torch"]
            flat = [torch.from_numpy(a) for a in flat]
        return _unflatten(self._output_spec, iter(flat))

    def save(self, path):
        """Writes model.onnx, plan.json and korch_compiled.json into folder `path` (created)."""
        path = Path(os.fspath(path))
        path.mkdir(parents=True, exist_ok=True)
        if path.resolve() == self.path.resolve():
            return path
        for name in (_MODEL, _PLAN, _META):
            shutil.copyfile(self.path / name, path / name)
        return path

    def __repr__(self):
        shapes = ", ".join(f"{n}: {d}{list(s)}" for n, s, d in self._inputs)
        return (
            f"<korch.CompiledModule ({shapes}) -> {len(self.output_names)} output(s), "
            f"{self.plan.kernels} kernels, {'cached plan' if self.from_cache else 'optimised'}, '{self.path}'>"
        )


def _write_atomic(path, data):
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _read_meta(folder):
    try:
        meta = json.loads((folder / _META).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == _FORMAT else None


def load(path, *, threads=None):
    """A CompiledModule from a folder written by CompiledModule.save() (or a compile cache entry)."""
    start = time.monotonic()
    folder = Path(os.fspath(path))
    meta = _read_meta(folder)
    if meta is None:
        raise _korch.Error(f"korch.load: {folder} has no valid {_META} (write one with CompiledModule.save)")
    threads = meta["threads"] if threads is None else threads
    session = _korch.Session(folder / _MODEL, folder / _PLAN, threads)
    return CompiledModule(session, meta, folder, True, time.monotonic() - start)


def compile(module, example_inputs, *, threads=2, cost="measured", cache=None, progress=None, opset=17):
    """Optimise a PyTorch module with korch; returns a CompiledModule (call it like the module).

    module: a torch.nn.Module; example_inputs: a tensor or a tuple of tensors (its positional
    inputs; their shapes and dtypes are the only ones the result accepts). threads: CPU threads
    for measuring and running. cost: "measured" (kernels compiled and timed on this CPU; minutes
    the first time for a large model, then cached) or "analytic" (a roofline model; seconds).
    cache: the folder for compiled plans and measured costs (default: korch's user cache,
    KORCH_CACHE_DIR). progress: None (a status line when stderr is a terminal), True, False, or a
    callable given each status line. opset: the ONNX opset torch exports.
    """
    torch = _torch()
    start = time.monotonic()
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"korch.compile: module must be a torch.nn.Module, got {type(module).__name__}")
    if cost not in ("measured", "analytic"):
        raise ValueError(f"korch.compile: unknown cost model '{cost}' (available: 'measured', 'analytic')")
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"korch.compile: threads must be a positive int, got {threads!r}")
    show = make_progress(progress)
    try:
        return _compile(torch, module, example_inputs, threads, cost, cache, show, opset, start)
    finally:
        show.done()


def _export(torch, module, tensors, input_names, output_names, opset):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
        # With autograd on, torch runs nn.MultiheadAttention / TransformerEncoderLayer through
        # their exportable modules rather than fused fast-path kernels that have no ONNX symbolic.
        with torch.enable_grad():
            try:
                torch.onnx.export(
                    module,
                    tuple(tensors),
                    buf,
                    opset_version=opset,
                    input_names=input_names,
                    output_names=output_names,
                    do_constant_folding=True,
                    training=torch.onnx.TrainingMode.EVAL,
                )
            except Exception as e:
                first = (str(e).strip().splitlines() or [""])[0]
                raise _korch.Error(
                    f"korch.compile: torch.onnx.export cannot export this module: {type(e).__name__}: {first}"
                ) from e
    return buf.getvalue()


def _compile(torch, module, example_inputs, threads, cost, cache, show, opset, start):
    from . import __version__

    tensors = _flatten_inputs(example_inputs, torch)
    train_only = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)
    if module.training and any(isinstance(m, train_only) for m in module.modules()):
        warnings.warn(
            "korch.compile: the module is in training mode; it is compiled in eval mode (as torch.onnx.export "
            "does: no dropout, BatchNorm with its running statistics)",
            UserWarning,
            stacklevel=3,
        )
    show(f"korch: running and exporting {type(module).__name__} to ONNX (opset {opset})", force=True)
    was_training = module.training
    module.train(False)
    try:
        with torch.no_grad():
            reference = module(*tensors)
    finally:
        module.train(was_training)
    leaves = []
    structure = _flatten_outputs(reference, torch, leaves)
    input_names = _input_names(module, len(tensors))
    output_names = [f"output_{i}" for i in range(len(leaves))]
    onnx_bytes = _export(torch, module, tensors, input_names, output_names, opset)

    meta = {
        "format": _FORMAT,
        "korch_version": __version__,
        "codegen": _korch.codegen_version,
        "cost": cost,
        "threads": threads,
        "opset": opset,
        "inputs": [
            {"name": n, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
            for n, t in zip(input_names, tensors)
        ],
        "outputs": output_names,
        "output_structure": structure,
    }
    key_source = hashlib.sha256(onnx_bytes)
    key_source.update(json.dumps(meta, sort_keys=True).encode())
    meta["key"] = key_source.hexdigest()[:32]
    root, profiles = cache_paths(cache)
    entry = root / "compiled" / meta["key"]

    model_path = entry / _MODEL
    if _read_meta(entry) == meta and model_path.is_file() and model_path.read_bytes() == onnx_bytes:
        show("korch: loading the cached plan", force=True)
        try:
            plan = _korch.load_plan(model_path, entry / _PLAN)
            session = _korch.Session(model_path, plan, threads)
            return CompiledModule(session, meta, entry, True, time.monotonic() - start)
        except _korch.Error as e:
            warnings.warn(f"korch.compile: the cached plan in {entry} cannot be used ({e}); optimising again")

    entry.mkdir(parents=True, exist_ok=True)
    (entry / _META).unlink(missing_ok=True)  # written last: marks the entry complete
    _write_atomic(model_path, onnx_bytes)
    what = "measured costs: compiling and timing kernels" if cost == "measured" else "analytic costs"
    show(f"korch: optimising ({what})", force=True)
    try:
        plan = _korch.optimize(
            model_path,
            threads=threads,
            cost=cost,
            cache=profiles if cost == "measured" else None,
            progress=lambda line: show("korch: " + line),
        )
        show(f"korch: compiling {plan.kernels} kernels", force=True)
        session = _korch.Session(model_path, plan, threads)
    except BaseException as e:
        shutil.rmtree(entry, ignore_errors=True)
        if isinstance(e, _korch.Error):
            raise _korch.Error(f"korch.compile: {e}") from e
        raise
    _write_atomic(entry / _PLAN, plan.to_json().encode())
    _write_atomic(entry / _META, json.dumps(meta, indent=1).encode())
    return CompiledModule(session, meta, entry, False, time.monotonic() - start)
