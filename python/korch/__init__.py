"""korch: optimal kernel orchestration for tensor programs.

From PyTorch (exports to ONNX, optimises, caches the plan; call the result like the module):

    import korch, torch
    fast = korch.compile(model, (x,))                   # cost="measured": kernels timed on this CPU
    y = fast(x)

As ONNX Runtime (replace onnxruntime.InferenceSession):

    sess = korch.InferenceSession("model.onnx")
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})

The lower-level API:

    plan = korch.optimize("model.onnx")                 # analytic costs; cost="measured" profiles
    print(plan.summary())
    plan.save("plan.json")
    sess = korch.Session("model.onnx", plan)            # or plan="plan.json", or None (optimize now)
    out = sess.run({"input": np.zeros(sess.input_shapes["input"], np.float32)})
    korch.export(plan, "pkg")                           # deployable package (C API), as `korch export`

Errors raised by korch itself (unsupported model, plan made for another model, bad file...) are
``korch.Error``, a subclass of ``RuntimeError`` whose message is korch's one-line explanation.
``Session.run`` raises ``KeyError`` for a missing or unknown input name and ``ValueError`` for an
input of the wrong dtype or shape.
"""

__version__ = "0.1.0"

from ._korch import (  # noqa: F401, E402
    Error,
    Plan,
    Session,
    default_cache_path,
    export,
    load_plan,
    optimize,
    read_tensor,
)
from ._compile import CompiledModule, compile, load  # noqa: E402
from ._ort import InferenceSession, NodeArg  # noqa: E402

KorchError = Error

# Show the public names as korch.X rather than korch._korch.X (reprs, tracebacks).
for _cls in (Error, Plan, Session):
    _cls.__module__ = __name__
del _cls

__all__ = [
    "CompiledModule",
    "Error",
    "InferenceSession",
    "KorchError",
    "NodeArg",
    "Plan",
    "Session",
    "compile",
    "default_cache_path",
    "export",
    "load",
    "load_plan",
    "optimize",
    "read_tensor",
]
