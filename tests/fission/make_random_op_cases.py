#!/usr/bin/env python3
"""Random single-operator ONNX test cases: the independent oracle for korch's fission rules.

korch lowers every ONNX operator into its own primitive IR through hand-written
"fission rules" (src/fission/rules_*.cc) and runs the result on its reference
executor.  A rule that gets an attribute, a broadcast, a padding convention or
an opset difference wrong still produces *some* numbers, so the rules need an
oracle that shares no code with them.  This script is that oracle: for every
operator korch claims to support it builds several small single-node models
(a few are two-node models, see below) with seeded random shapes and attributes
that cover the interesting variants -- broadcasting, negative axes, keepdims,
strides/dilations/pads/groups/auto_pad, ceil_mode, count_include_pad, Gemm
transposes, Resize coordinate modes, Pad modes, negative Slice steps, uneven
Split, attribute-vs-input opset forms, ... -- and has onnxruntime (CPU
execution provider, all graph optimizations disabled) compute the expected
outputs.

Conventions:
  * Non-data parameters (shapes, axes, pads, scales, sizes, split, repeats,
    Slice starts/ends, weights, normalization statistics) are initializers;
    data tensors are graph inputs (random float32 in a range that suits the
    op, int64 indices, bool for logical ops).
  * Ops whose result would be entirely constant (Shape, Size, Range,
    ConstantOfShape, Constant, ScatterND) get a graph input, e.g.
    out = Add(x, Range(...)).
  * Only dtypes korch supports are used: float32, float64, int64, int32,
    int8, uint8, bool.
  * Tensors stay small (well under 100k elements).
  * Configurations where onnxruntime is known to depart from the ONNX spec
    are avoided (see the comments at gen_random_windows and gen_resize):
    Resize align_corners with a fractional scale * length, tf_crop_and_resize
    on an axis whose length does not change, SAME auto_pad with dilation or
    with stride > kernel, ConvTranspose output_shape above the natural size.
    Nearest-mode Resize boundary cases use dyadic scales, so float32 and
    float64 coordinate arithmetic agree.
  * A few cases deliberately exercise newer features korch may reject
    (Resize antialias,
    ScatterND reduction); a clean "not supported" error there is expected.

Each case is written in the standard ONNX backend test layout:

    OUTDIR/<Op>_<variant>/model.onnx
    OUTDIR/<Op>_<variant>/test_data_set_0/input_K.pb   (tensor name = graph input name)
    OUTDIR/<Op>_<variant>/test_data_set_0/output_K.pb  (tensor name = graph output name)

so each one can be checked with `korch check OUTDIR/<Op>_<variant>`.

Usage: python3 tests/fission/make_random_op_cases.py OUTDIR [--seed 0]

Output is deterministic for a given seed (and given onnx/onnxruntime
versions); each op draws from its own random stream, so adding cases to one op
does not change the others.  Requires the PyPI packages onnx, onnxruntime and
numpy.  Ops or variants the installed onnxruntime cannot run (e.g. Gelu at
opset 20 on an old onnxruntime) are skipped with a printed note.  Prints one
summary line (cases per op, total); exit status 1 if a case that should
always be generated could not be.
"""

import argparse
import os
import shutil
import sys
import zlib
from collections import OrderedDict

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)

F32 = np.float32
I64 = np.int64


def i64(values):
    return np.array(values, dtype=I64)


def f32c(values):
    return np.array(values, dtype=F32)


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


class CaseWriter:
    """Builds, evaluates (onnxruntime) and writes the cases; keeps the counts."""

    def __init__(self, outdir, seed):
        self.outdir = outdir
        self.seed = seed
        self.counts = OrderedDict()
        self.names = set()
        self.notes = []
        self.errors = []
        self.skipped_ops = set()
        self.opts = ort.SessionOptions()
        self.opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        self.opts.log_severity_level = 4
        self.opts.intra_op_num_threads = 1
        self.opts.inter_op_num_threads = 1

    def rng(self, op):
        """A random stream private to one op (stable when other ops change)."""
        return np.random.default_rng([self.seed, zlib.crc32(op.encode())])

    def case(self, op, variant, nodes, inputs, inits=None, outputs=None, opset=13,
             optional=False, op_optional=False):
        """Writes OUTDIR/<op>_<variant>.

        nodes: a NodeProto or a list of them; inputs/inits: name -> ndarray
        (graph inputs, in order / initializers); outputs: graph output names
        (default: the last node's outputs).  optional: a failure to run in
        onnxruntime only skips this case with a note; op_optional: ... and the
        rest of this op's cases too (op missing from the installed onnxruntime).
        """
        name = f"{op}_{variant}"
        assert name not in self.names, f"duplicate case {name}"
        self.names.add(name)
        self.counts.setdefault(op, 0)
        if op in self.skipped_ops:
            return
        if isinstance(nodes, onnx.NodeProto):
            nodes = [nodes]
        inputs = OrderedDict((n, np.asarray(a)) for n, a in inputs.items())
        inits = OrderedDict((n, np.asarray(a)) for n, a in (inits or {}).items())
        if outputs is None:
            outputs = [o for o in nodes[-1].output if o]
        try:
            model = self._model(name, nodes, inputs, inits, outputs, opset)
            results = self._run(model, inputs, outputs)
        except Exception as e:  # noqa: BLE001 - onnx/onnxruntime raise many kinds
            msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            if op_optional:
                self.skipped_ops.add(op)
                self.notes.append(f"note: skipping {op} (opset {opset}): onnxruntime "
                                  f"{ort.__version__} cannot run it: {msg}")
            elif optional:
                self.notes.append(f"note: skipping case {name}: {msg}")
            else:
                self.errors.append(f"error: case {name} could not be generated: {msg}")
            return
        # Concrete output types and shapes from the actual results.
        del model.graph.output[:]
        for o, r in zip(outputs, results):
            model.graph.output.append(helper.make_tensor_value_info(
                o, helper.np_dtype_to_tensor_dtype(r.dtype), list(r.shape)))
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as e:
            if "deprecated" not in str(e):  # GroupNormalization-18 is, yet still valid
                raise
        self._write(name, model, inputs, outputs, results)
        self.counts[op] += 1

    def _model(self, name, nodes, inputs, inits, outputs, opset):
        graph_inputs = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)) for n, a in inputs.items()]
        initializers = [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()]
        graph = helper.make_graph(nodes, name, graph_inputs,
                                  [helper.make_empty_tensor_value_info(o) for o in outputs],
                                  initializer=initializers)
        opsets = [helper.make_opsetid("", opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="korch-fission-oracle")
        model.ir_version = max(7, helper.find_min_ir_version_for(opsets))
        # Output element types from ONNX shape inference (ORT needs them);
        # where inference gives none (e.g. some function ops), the first
        # graph input's type.
        inferred = onnx.shape_inference.infer_shapes(model)
        fallback = graph_inputs[0].type.tensor_type.elem_type if graph_inputs else 0
        del model.graph.output[:]
        for vi in inferred.graph.output:
            elem = vi.type.tensor_type.elem_type or fallback
            if elem == 0:
                raise RuntimeError(f"no inferred type for output {vi.name}")
            model.graph.output.append(helper.make_tensor_value_info(vi.name, elem, None))
        return model

    def _run(self, model, inputs, outputs):
        sess = ort.InferenceSession(model.SerializeToString(), self.opts,
                                    providers=["CPUExecutionProvider"])
        return [np.asarray(r) for r in sess.run(outputs, dict(inputs))]

    def _write(self, name, model, inputs, outputs, results):
        case_dir = os.path.join(self.outdir, name)
        if os.path.exists(case_dir):
            shutil.rmtree(case_dir)
        data_dir = os.path.join(case_dir, "test_data_set_0")
        os.makedirs(data_dir)
        onnx.save(model, os.path.join(case_dir, "model.onnx"))
        for k, (n, a) in enumerate(inputs.items()):
            with open(os.path.join(data_dir, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(a), n).SerializeToString())
        for k, (n, r) in enumerate(zip(outputs, results)):
            with open(os.path.join(data_dir, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(r, n).SerializeToString())


# --------------------------------------------------------------------------
# Random data helpers


def rshape(rng, rank, lo=2, hi=5):
    return tuple(int(d) for d in rng.integers(lo, hi + 1, size=rank))


def uni(rng, shape, lo=-2.0, hi=2.0, dtype=F32):
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def away_from_zero(rng, shape, lo=0.5, hi=2.0):
    mag = rng.uniform(lo, hi, size=shape)
    sign = np.where(rng.random(size=shape) < 0.5, -1.0, 1.0)
    return (mag * sign).astype(F32)


def small_ints_f(rng, shape, lo=-3, hi=3):
    """Integer-valued floats: makes Equal/ArgMax ties likely."""
    return rng.integers(lo, hi + 1, size=shape).astype(F32)


def ints(rng, shape, lo=-20, hi=20, dtype=I64):
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def nonzero_ints(rng, shape, lo=1, hi=7, dtype=I64):
    mag = rng.integers(lo, hi + 1, size=shape)
    sign = np.where(rng.random(size=shape) < 0.5, -1, 1)
    return (mag * sign).astype(dtype)


def bools(rng, shape):
    return rng.random(size=shape) < 0.5


def bcast_patterns(rng):
    """(variant, shape_a, shape_b) pairs covering numpy broadcasting forms."""
    s4 = rshape(rng, 4, 2, 4)
    s3 = rshape(rng, 3, 2, 5)
    return [
        ("same", s4, s4),
        ("scalar", s4, ()),
        ("trailing", s4, s4[-1:]),
        ("chan", s4, (s4[1], 1, 1)),
        ("bidir", (s3[0], 1, s3[2]), (s3[1], 1)),
        ("lhs_bcast", (1, s3[2]), s3),
        ("ones_mid", (s3[0], s3[1], s3[2]), (s3[0], 1, s3[2])),
    ]


# --------------------------------------------------------------------------
# Element-wise unary ops

UNARY_RANGES = {
    "Abs": (-3, 3), "Ceil": (-5, 5), "Cos": (-4, 4), "Erf": (-3, 3), "Exp": (-3, 3),
    "Floor": (-5, 5), "Log": (0.05, 5), "Neg": (-3, 3), "Relu": (-3, 3),
    "Sigmoid": (-6, 6), "Sin": (-4, 4), "Softplus": (-5, 5), "Softsign": (-5, 5),
    "Sqrt": (0.0, 5), "Tanh": (-3, 3), "Identity": (-3, 3),
}


def gen_unary(w):
    for op, (lo, hi) in UNARY_RANGES.items():
        rng = w.rng(op)
        for tag, shp in (("r4", rshape(rng, 4)), ("r2", rshape(rng, 2, 3, 9)), ("r1", rshape(rng, 1, 5, 12))):
            w.case(op, tag, node(op, ["x"], ["y"]), {"x": uni(rng, shp, lo, hi)})
        if op in ("Abs", "Relu", "Exp", "Neg"):
            w.case(op, "scalar", node(op, ["x"], ["y"]), {"x": np.array(uni(rng, (), lo, hi))})
        if op in ("Floor", "Ceil"):
            x = uni(rng, (4, 6), lo, hi)
            x[0] = [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0]  # exact integers stay put
            x[1] = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]
            w.case(op, "exact", node(op, ["x"], ["y"]), {"x": x})
        if op in ("Exp", "Sigmoid", "Tanh", "Sqrt", "Relu", "Abs", "Neg"):
            w.case(op, "f64", node(op, ["x"], ["y"]),
                   {"x": uni(rng, rshape(rng, 3), lo, hi, np.float64)}, optional=True)
        if op in ("Abs", "Neg"):
            w.case(op, "i64", node(op, ["x"], ["y"]), {"x": ints(rng, rshape(rng, 3))})
            w.case(op, "i32", node(op, ["x"], ["y"]), {"x": ints(rng, rshape(rng, 2), dtype=np.int32)},
                   optional=True)
        if op == "Identity":
            w.case(op, "i64", node(op, ["x"], ["y"]), {"x": ints(rng, rshape(rng, 2))})
            w.case(op, "bool", node(op, ["x"], ["y"]), {"x": bools(rng, rshape(rng, 3))})

    rng = w.rng("Reciprocal")
    for tag, shp in (("r4", rshape(rng, 4)), ("r2", rshape(rng, 2, 3, 9)), ("r1", rshape(rng, 1, 5, 12))):
        w.case("Reciprocal", tag, node("Reciprocal", ["x"], ["y"]), {"x": away_from_zero(rng, shp, 0.2, 3)})

    rng = w.rng("Sign")
    for tag, shp in (("r4", rshape(rng, 4)), ("r2", rshape(rng, 2, 3, 9))):
        x = uni(rng, shp, -3, 3)
        x.flat[::3] = 0.0
        w.case("Sign", tag, node("Sign", ["x"], ["y"]), {"x": x})
    w.case("Sign", "i64", node("Sign", ["x"], ["y"]), {"x": ints(rng, rshape(rng, 3), -3, 3)})

    rng = w.rng("Round")
    w.case("Round", "r3", node("Round", ["x"], ["y"]), {"x": uni(rng, rshape(rng, 3), -5, 5)},
           opset=13, op_optional=True)
    w.case("Round", "halves", node("Round", ["x"], ["y"]),
           {"x": f32c([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.49, 0.51, 2.0, -2.0])})

    # Activations with attributes.
    def act(op, variants, lo, hi, opset=13, op_optional=False):
        rng = w.rng(op)
        for tag, attrs in variants:
            shp = rshape(rng, int(rng.integers(2, 5)))
            w.case(op, tag, node(op, ["x"], ["y"], **attrs), {"x": uni(rng, shp, lo, hi)},
                   opset=opset, op_optional=op_optional)

    act("Elu", [("default", {}), ("alpha0p5", {"alpha": 0.5}), ("alpha2", {"alpha": 2.0})], -4, 4)
    act("HardSigmoid", [("default", {}), ("a0p3_b0p6", {"alpha": 0.3, "beta": 0.6}),
                        ("a1_b0", {"alpha": 1.0, "beta": 0.0})], -5, 5)
    act("HardSwish", [("r_a", {}), ("r_b", {})], -5, 5, opset=14)
    act("LeakyRelu", [("default", {}), ("alpha0p2", {"alpha": 0.2}), ("alpha_neg", {"alpha": -0.5})], -4, 4)
    act("Selu", [("default", {}), ("custom", {"alpha": 1.2, "gamma": 0.9})], -4, 4)
    act("Mish", [("r_a", {}), ("r_b", {})], -5, 5, opset=18, op_optional=True)
    act("Gelu", [("none", {}), ("tanh", {"approximate": "tanh"}),
                 ("none_attr", {"approximate": "none"})], -4, 4, opset=20, op_optional=True)

    rng = w.rng("PRelu")
    s = rshape(rng, 4)
    for tag, slope_shape in (("chan", (s[1], 1, 1)), ("one", (1,)), ("full", s), ("trailing", s[-1:])):
        w.case("PRelu", tag, node("PRelu", ["x", "slope"], ["y"]),
               {"x": uni(rng, s, -3, 3)}, {"slope": uni(rng, slope_shape, -1, 1)})
    s2 = rshape(rng, 2)
    w.case("PRelu", "slope_input", node("PRelu", ["x", "slope"], ["y"]),
           {"x": uni(rng, s2, -3, 3), "slope": uni(rng, (s2[1],), -1, 1)})

    rng = w.rng("Clip")
    s = rshape(rng, 3)
    w.case("Clip", "op6_attrs", node("Clip", ["x"], ["y"], min=-0.5, max=0.8), {"x": uni(rng, s)}, opset=6)
    w.case("Clip", "op6_min_only", node("Clip", ["x"], ["y"], min=0.0), {"x": uni(rng, s)}, opset=6)
    w.case("Clip", "op6_default", node("Clip", ["x"], ["y"]), {"x": uni(rng, s)}, opset=6)
    for opset in (11, 13):
        w.case("Clip", f"op{opset}_both", node("Clip", ["x", "lo", "hi"], ["y"]), {"x": uni(rng, s)},
               {"lo": np.array(-0.7, F32), "hi": np.array(1.1, F32)}, opset=opset)
        w.case("Clip", f"op{opset}_min_only", node("Clip", ["x", "lo"], ["y"]), {"x": uni(rng, s)},
               {"lo": np.array(0.2, F32)}, opset=opset)
        w.case("Clip", f"op{opset}_max_only", node("Clip", ["x", "", "hi"], ["y"]), {"x": uni(rng, s)},
               {"hi": np.array(-0.1, F32)}, opset=opset)
        w.case("Clip", f"op{opset}_none", node("Clip", ["x"], ["y"]), {"x": uni(rng, s)}, opset=opset)
    w.case("Clip", "op13_i64", node("Clip", ["x", "lo", "hi"], ["y"]), {"x": ints(rng, s)},
           {"lo": np.array(-5, I64), "hi": np.array(7, I64)})
    w.case("Clip", "op13_min_gt_max", node("Clip", ["x", "lo", "hi"], ["y"]), {"x": uni(rng, s)},
           {"lo": np.array(0.5, F32), "hi": np.array(-0.5, F32)})

    rng = w.rng("Cast")
    s = rshape(rng, 3)
    xs = uni(rng, s, -50, 50)
    xs.flat[::4] = 0.0
    for tag, to, x in (
            ("f32_to_i64", TensorProto.INT64, xs),
            ("f32_to_i32", TensorProto.INT32, xs),
            ("f32_to_i8", TensorProto.INT8, xs),
            ("f32_to_u8", TensorProto.UINT8, np.abs(xs) * 2.5),
            ("f32_to_bool", TensorProto.BOOL, xs),
            ("f32_to_f64", TensorProto.DOUBLE, xs),
            ("f32_to_f32", TensorProto.FLOAT, xs),
            ("i64_to_f32", TensorProto.FLOAT, ints(rng, s, -1000, 1000)),
            ("i64_to_i32", TensorProto.INT32, ints(rng, s, -1000, 1000)),
            ("i64_to_bool", TensorProto.BOOL, ints(rng, s, -2, 2)),
            ("bool_to_f32", TensorProto.FLOAT, bools(rng, s)),
            ("bool_to_i64", TensorProto.INT64, bools(rng, s)),
            ("i32_to_f64", TensorProto.DOUBLE, ints(rng, s, -1000, 1000, np.int32)),
            ("u8_to_f32", TensorProto.FLOAT, ints(rng, s, 0, 255, np.uint8)),
            ("i8_to_i64", TensorProto.INT64, ints(rng, s, -128, 127, np.int8)),
            ("f64_to_f32", TensorProto.FLOAT, uni(rng, s, -5, 5, np.float64))):
        w.case("Cast", tag, node("Cast", ["x"], ["y"], to=to), {"x": x.astype(x.dtype)})


# --------------------------------------------------------------------------
# Element-wise binary / variadic ops


def gen_binary(w):
    def data(op, rng, shp, which):
        if op == "Div" and which == 1:
            return away_from_zero(rng, shp)
        if op == "Pow":
            return uni(rng, shp, 0.1, 3) if which == 0 else uni(rng, shp, -2, 2)
        return uni(rng, shp, -3, 3)

    for op in ("Add", "Sub", "Mul", "Div", "Pow"):
        rng = w.rng(op)
        for tag, sa, sb in bcast_patterns(rng):
            w.case(op, tag, node(op, ["a", "b"], ["y"]),
                   {"a": data(op, rng, sa, 0), "b": data(op, rng, sb, 1)})
        s = rshape(rng, 3)
        w.case(op, "const_rhs", node(op, ["a", "b"], ["y"]), {"a": data(op, rng, s, 0)},
               {"b": data(op, rng, s[1:], 1)})
        w.case(op, "const_lhs", node(op, ["a", "b"], ["y"]), {"b": data(op, rng, s, 1)},
               {"a": data(op, rng, (s[2],), 0)})
        w.case(op, "same_input", node(op, ["a", "a"], ["y"]), {"a": data(op, rng, s, 0)})
        if op != "Pow":
            b = nonzero_ints(rng, s[1:]) if op == "Div" else ints(rng, s[1:])
            w.case(op, "i64", node(op, ["a", "b"], ["y"]), {"a": ints(rng, s), "b": b})
            w.case(op, "i32", node(op, ["a", "b"], ["y"]),
                   {"a": ints(rng, s, dtype=np.int32), "b": b.astype(np.int32)}, optional=True)
            w.case(op, "f64", node(op, ["a", "b"], ["y"]),
                   {"a": data(op, rng, s, 0).astype(np.float64), "b": data(op, rng, s, 1).astype(np.float64)},
                   optional=True)
    rng = w.rng("Pow")
    s = rshape(rng, 3)
    w.case("Pow", "square_neg_base", node("Pow", ["a", "b"], ["y"]), {"a": uni(rng, s, -3, 3)},
           {"b": np.array(2.0, F32)})
    w.case("Pow", "cube_neg_base", node("Pow", ["a", "b"], ["y"]), {"a": uni(rng, s, -2, 2)},
           {"b": np.array(3.0, F32)})
    w.case("Pow", "sqrt_exp", node("Pow", ["a", "b"], ["y"]), {"a": uni(rng, s, 0.0, 4)},
           {"b": np.array(0.5, F32)})
    w.case("Pow", "exp_i64", node("Pow", ["a", "b"], ["y"]), {"a": uni(rng, s, -2, 2)},
           {"b": np.array(3, I64)}, optional=True)

    for op in ("Max", "Min", "Mean", "Sum"):
        rng = w.rng(op)
        s = rshape(rng, 3)
        w.case(op, "one", node(op, ["a"], ["y"]), {"a": uni(rng, s)})
        w.case(op, "two_same", node(op, ["a", "b"], ["y"]), {"a": uni(rng, s), "b": uni(rng, s)})
        w.case(op, "two_bcast", node(op, ["a", "b"], ["y"]), {"a": uni(rng, s), "b": uni(rng, (s[1], 1))})
        w.case(op, "three_bcast", node(op, ["a", "b", "c"], ["y"]),
               {"a": uni(rng, (s[0], 1, s[2])), "b": uni(rng, (s[1], 1)), "c": uni(rng, ())})
        w.case(op, "four", node(op, ["a", "b", "c", "d"], ["y"]),
               {"a": uni(rng, s), "b": uni(rng, s[1:]), "c": uni(rng, s[2:]), "d": uni(rng, s)})
        w.case(op, "const", node(op, ["a", "b"], ["y"]), {"a": uni(rng, s)}, {"b": uni(rng, s[1:])})
        if op in ("Max", "Min"):
            w.case(op, "i64", node(op, ["a", "b"], ["y"]), {"a": ints(rng, s), "b": ints(rng, s[2:])})
            x = small_ints_f(rng, s)
            w.case(op, "ties", node(op, ["a", "b"], ["y"]), {"a": x, "b": small_ints_f(rng, s)})

    rng = w.rng("Mod")
    s = rshape(rng, 3)
    w.case("Mod", "i64_fmod0", node("Mod", ["a", "b"], ["y"]), {"a": ints(rng, s), "b": nonzero_ints(rng, s)})
    w.case("Mod", "i64_fmod0_bcast", node("Mod", ["a", "b"], ["y"]),
           {"a": ints(rng, s)}, {"b": nonzero_ints(rng, s[2:])})
    w.case("Mod", "i64_fmod1", node("Mod", ["a", "b"], ["y"], fmod=1),
           {"a": ints(rng, s), "b": nonzero_ints(rng, s)})
    w.case("Mod", "i32_fmod0", node("Mod", ["a", "b"], ["y"]),
           {"a": ints(rng, s, dtype=np.int32), "b": nonzero_ints(rng, s, dtype=np.int32)}, optional=True)
    w.case("Mod", "f32_fmod1", node("Mod", ["a", "b"], ["y"], fmod=1),
           {"a": uni(rng, s, -10, 10), "b": away_from_zero(rng, s, 0.7, 3)})
    w.case("Mod", "f32_fmod1_bcast", node("Mod", ["a", "b"], ["y"], fmod=1),
           {"a": uni(rng, s, -10, 10)}, {"b": away_from_zero(rng, (s[2],), 0.7, 3)})

    for op in ("Equal", "Greater", "Less"):
        rng = w.rng(op)
        for tag, sa, sb in bcast_patterns(rng)[:5]:
            w.case(op, tag, node(op, ["a", "b"], ["y"]),
                   {"a": small_ints_f(rng, sa, -2, 2), "b": small_ints_f(rng, sb, -2, 2)})
        s = rshape(rng, 3)
        w.case(op, "i64", node(op, ["a", "b"], ["y"]), {"a": ints(rng, s, -3, 3), "b": ints(rng, s[2:], -3, 3)})
        w.case(op, "const", node(op, ["a", "b"], ["y"]), {"a": small_ints_f(rng, s, -2, 2)},
               {"b": np.array(0.0, F32)})
        if op == "Equal":
            w.case(op, "bool", node(op, ["a", "b"], ["y"]), {"a": bools(rng, s), "b": bools(rng, s)})

    rng = w.rng("And")
    s = rshape(rng, 3)
    w.case("And", "same", node("And", ["a", "b"], ["y"]), {"a": bools(rng, s), "b": bools(rng, s)})
    w.case("And", "bcast", node("And", ["a", "b"], ["y"]), {"a": bools(rng, s), "b": bools(rng, (s[1], 1))})
    w.case("And", "scalar", node("And", ["a", "b"], ["y"]), {"a": bools(rng, s), "b": np.array(True)})
    w.case("And", "const", node("And", ["a", "b"], ["y"]), {"a": bools(rng, s)}, {"b": bools(rng, s[2:])})

    rng = w.rng("Not")
    w.case("Not", "r3", node("Not", ["x"], ["y"]), {"x": bools(rng, rshape(rng, 3))})
    w.case("Not", "r1", node("Not", ["x"], ["y"]), {"x": bools(rng, (7,))})
    w.case("Not", "of_less", [node("Less", ["x", "t"], ["c"]), node("Not", ["c"], ["y"])],
           {"x": uni(rng, (3, 4))}, {"t": np.array(0.0, F32)})

    rng = w.rng("Where")
    s = rshape(rng, 3)
    w.case("Where", "same", node("Where", ["c", "a", "b"], ["y"]),
           {"c": bools(rng, s), "a": uni(rng, s), "b": uni(rng, s)})
    w.case("Where", "bcast", node("Where", ["c", "a", "b"], ["y"]),
           {"c": bools(rng, (s[1], 1)), "a": uni(rng, (s[0], 1, s[2])), "b": uni(rng, ())})
    w.case("Where", "const_xy", node("Where", ["c", "a", "b"], ["y"]),
           {"c": bools(rng, s)}, {"a": uni(rng, s[2:]), "b": np.array(-1.0, F32)})
    w.case("Where", "const_cond", node("Where", ["c", "a", "b"], ["y"]),
           {"a": uni(rng, s), "b": uni(rng, s)}, {"c": bools(rng, s[1:])})
    w.case("Where", "i64", node("Where", ["c", "a", "b"], ["y"]),
           {"c": bools(rng, s), "a": ints(rng, s), "b": ints(rng, (s[2],))})
    w.case("Where", "of_greater", [node("Greater", ["x", "t"], ["c"]), node("Where", ["c", "x", "z"], ["y"])],
           {"x": uni(rng, s)}, {"t": np.array(0.3, F32), "z": np.array(0.0, F32)})


# --------------------------------------------------------------------------
# Convolutions and pooling


def gen_conv(w):
    rng = w.rng("Conv")

    def conv(tag, x_shape, m, k, group=1, bias=False, w_input=False, kshape_attr=True, **attrs):
        c = x_shape[1]
        wt = uni(rng, (m, c // group) + tuple(k), -0.5, 0.5)
        names = ["x", "w"] + (["b"] if bias else [])
        if group != 1:
            attrs["group"] = group
        if kshape_attr:
            attrs["kernel_shape"] = list(k)
        inputs = {"x": uni(rng, x_shape)}
        inits = {}
        (inputs if w_input else inits)["w"] = wt
        if bias:
            inits["b"] = uni(rng, (m,), -1, 1)
        w.case("Conv", tag, node("Conv", names, ["y"], **attrs), inputs, inits)

    h, wd = (int(v) for v in rng.integers(5, 10, size=2))
    conv("basic", (1, 3, h, wd), 4, (3, 3))
    conv("bias", (2, 3, h, wd), 5, (3, 3), bias=True)
    conv("stride2_pad1", (1, 3, h, wd), 4, (3, 3), bias=True, strides=[2, 2], pads=[1, 1, 1, 1])
    conv("asym_pads", (1, 2, h, wd), 3, (3, 3), strides=[1, 2], pads=[0, 1, 2, 1])
    conv("dilation2", (1, 2, h + 2, wd + 2), 3, (3, 3), dilations=[2, 2], pads=[2, 2, 2, 2])
    conv("dil_stride", (1, 2, h + 3, wd + 3), 2, (3, 2), dilations=[2, 1], strides=[2, 3], pads=[1, 0, 1, 1])
    conv("group2", (1, 4, h, wd), 6, (3, 3), group=2, bias=True, pads=[1, 1, 1, 1])
    conv("depthwise", (2, 4, h, wd), 4, (3, 3), group=4, bias=True, pads=[1, 1, 1, 1])
    conv("depthwise_mult2", (1, 3, h, wd), 6, (3, 3), group=3)
    conv("same_upper", (1, 3, 8, 7), 4, (2, 2), auto_pad="SAME_UPPER", strides=[2, 2])
    conv("same_lower", (1, 3, 8, 7), 4, (2, 2), auto_pad="SAME_LOWER", strides=[2, 2])
    conv("same_upper_k3s1", (1, 2, h, wd), 3, (3, 3), auto_pad="SAME_UPPER")
    conv("same_lower_k4", (1, 2, h, wd), 3, (4, 4), auto_pad="SAME_LOWER")
    conv("valid", (1, 3, h, wd), 4, (3, 3), auto_pad="VALID", strides=[2, 2])
    conv("rect_kernel_no_kshape", (1, 2, h, wd), 3, (2, 3), kshape_attr=False, pads=[1, 0, 0, 1])
    conv("pointwise", (2, 5, h, wd), 3, (1, 1), bias=True)
    conv("kernel_eq_input", (1, 2, 4, 5), 3, (4, 5))
    conv("w_input", (1, 3, h, wd), 2, (3, 3), w_input=True, pads=[1, 1, 1, 1])
    conv("conv1d", (2, 3, 11), 4, (3,), bias=True, strides=[2], pads=[1, 1], dilations=[2])
    conv("conv1d_same_upper", (1, 2, 9), 3, (4,), auto_pad="SAME_UPPER", strides=[2])
    conv("conv3d", (1, 2, 4, 5, 5), 3, (2, 3, 3), bias=True, pads=[0, 1, 1, 1, 1, 0], strides=[1, 2, 1])

    rng = w.rng("ConvTranspose")

    def convt(tag, x_shape, m_per_group, k, group=1, bias=False, **attrs):
        c = x_shape[1]
        wt = uni(rng, (c, m_per_group) + tuple(k), -0.5, 0.5)
        names = ["x", "w"] + (["b"] if bias else [])
        if group != 1:
            attrs["group"] = group
        inits = {"w": wt}
        if bias:
            inits["b"] = uni(rng, (m_per_group * group,), -1, 1)
        w.case("ConvTranspose", tag, node("ConvTranspose", names, ["y"], **attrs), {"x": uni(rng, x_shape)}, inits)

    h, wd = (int(v) for v in rng.integers(3, 6, size=2))
    convt("basic", (1, 3, h, wd), 2, (3, 3))
    convt("bias_kshape", (2, 2, h, wd), 3, (3, 3), bias=True, kernel_shape=[3, 3])
    convt("stride2_pad1_outpad1", (1, 3, h, wd), 2, (3, 3), strides=[2, 2], pads=[1, 1, 1, 1],
          output_padding=[1, 1])
    convt("stride2_k4_pad1", (1, 2, h, wd), 3, (4, 4), bias=True, strides=[2, 2], pads=[1, 1, 1, 1])
    convt("stride_2_3", (1, 2, h, wd), 2, (3, 2), strides=[2, 3])
    convt("asym_pads", (1, 2, h, wd), 2, (3, 3), strides=[2, 2], pads=[0, 1, 2, 0])
    convt("group2", (1, 4, h, wd), 3, (3, 3), group=2, bias=True, strides=[2, 2], pads=[1, 1, 1, 1])
    convt("depthwise", (1, 3, h, wd), 1, (3, 3), group=3, strides=[2, 2])
    convt("dilation2", (1, 2, h, wd), 2, (3, 3), dilations=[2, 2], pads=[1, 1, 1, 1])
    convt("output_shape", (1, 2, h, wd), 2, (3, 3), strides=[2, 2], output_shape=[2 * h, 2 * wd])
    convt("output_shape_odd", (1, 2, h, wd), 2, (3, 3), strides=[2, 2], output_shape=[2 * h + 1, 2 * wd])
    convt("same_upper", (1, 2, h, wd), 2, (3, 3), strides=[2, 2], auto_pad="SAME_UPPER")
    convt("same_lower", (1, 2, h, wd), 2, (3, 3), strides=[2, 2], auto_pad="SAME_LOWER")
    convt("valid", (1, 2, h, wd), 2, (3, 3), strides=[2, 2], auto_pad="VALID")
    convt("conv1d", (2, 3, 6), 2, (3,), bias=True, strides=[3], pads=[1, 2], output_padding=[1])
    convt("conv3d", (1, 2, 2, 3, 3), 2, (2, 2, 2), strides=[2, 1, 2], pads=[0, 1, 0, 0, 0, 1])


def gen_pool(w):
    for op in ("MaxPool", "AveragePool"):
        rng = w.rng(op)
        h, wd = (int(v) for v in rng.integers(6, 10, size=2))
        x4 = lambda c=3: uni(rng, (int(rng.integers(1, 3)), c, h, wd))  # noqa: E731
        P = lambda tag, x, **a: w.case(op, tag, node(op, ["x"], ["y"], **a), {"x": x})  # noqa: E731
        P("k2s2", x4(), kernel_shape=[2, 2], strides=[2, 2])
        P("k3s1", x4(), kernel_shape=[3, 3])
        P("k3s1p1", x4(), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        P("k3s2p1", x4(), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        P("rect_asym_pads", x4(), kernel_shape=[2, 3], strides=[1, 2], pads=[0, 1, 1, 0])
        P("ceil_k3s2", uni(rng, (1, 2, 8, 9)), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
        P("floor_k3s2", uni(rng, (1, 2, 8, 9)), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=0)
        P("ceil_k2s2_p1", uni(rng, (1, 2, 7, 8)), kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
          ceil_mode=1)
        P("same_upper", uni(rng, (1, 2, 8, 7)), kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
        P("same_lower", uni(rng, (1, 2, 8, 7)), kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER")
        P("same_upper_k4s1", uni(rng, (1, 2, 6, 5)), kernel_shape=[4, 4], auto_pad="SAME_UPPER")
        P("valid", uni(rng, (1, 2, 8, 7)), kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID")
        P("pool1d", uni(rng, (2, 3, 11)), kernel_shape=[3], strides=[2], pads=[1, 1])
        P("pool3d", uni(rng, (1, 2, 4, 5, 6)), kernel_shape=[2, 2, 3], strides=[2, 1, 2], pads=[0, 1, 1, 0, 0, 1])
        if op == "MaxPool":
            P("dilation2", x4(), kernel_shape=[2, 2], dilations=[2, 2])
            P("dilation2_p1_s2", x4(), kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 1, 1, 1], strides=[2, 2])
            P("all_negative_p1", uni(rng, (1, 2, 5, 5), -5, -1), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            P("opset11", x4(), kernel_shape=[2, 2], strides=[2, 2])
            w.case(op, "i8", node(op, ["x"], ["y"], kernel_shape=[2, 2], strides=[1, 1]),
                   {"x": ints(rng, (1, 2, 5, 5), -100, 100, np.int8)}, optional=True)
            w.case(op, "u8", node(op, ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                   {"x": ints(rng, (1, 2, 5, 5), 0, 255, np.uint8)}, optional=True)
        else:
            P("cip1_k3s1p1", x4(), kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
            P("cip0_k3s2p1", x4(), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)
            P("cip1_asym", x4(), kernel_shape=[2, 3], pads=[1, 0, 0, 2], count_include_pad=1)
            P("ceil_cip0_p1", uni(rng, (1, 2, 7, 8)), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
              ceil_mode=1, count_include_pad=0)
            P("ceil_cip1_p1", uni(rng, (1, 2, 7, 8)), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
              ceil_mode=1, count_include_pad=1)
            P("ceil_cip1_nopad", uni(rng, (1, 2, 8, 9)), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
              count_include_pad=1)
            P("same_upper_cip1", uni(rng, (1, 2, 8, 7)), kernel_shape=[3, 3], strides=[2, 2],
              auto_pad="SAME_UPPER", count_include_pad=1)
            P("same_lower_cip0", uni(rng, (1, 2, 7, 7)), kernel_shape=[4, 4], auto_pad="SAME_LOWER")
            P("pool1d_cip1", uni(rng, (1, 3, 10)), kernel_shape=[4], strides=[3], pads=[2, 1], count_include_pad=1)

    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        rng = w.rng(op)
        for tag, shp in (("r4", (2,) + rshape(rng, 3, 2, 7)), ("r3", (1, 3, 9)), ("r5", (1, 2, 3, 4, 5)),
                         ("one_by_one", (2, 3, 1, 1))):
            w.case(op, tag, node(op, ["x"], ["y"]), {"x": uni(rng, shp)})


def gen_random_windows(w, n_each=8):
    """Fully random Conv/ConvTranspose/MaxPool/AveragePool attribute sets.

    Configurations are valid by construction and stay inside what
    onnxruntime computes per the spec: auto_pad SAME_* only with dilation 1
    and stride <= kernel (ORT rejects dilated SAME Conv, gets the dilated
    SAME MaxPool output shape wrong, and errors on the negative total padding
    of stride > kernel); ConvTranspose SAME_* only with stride <= dilated
    kernel (otherwise ORT clamps the negative total padding to 0 and returns
    stride * (in - 1) + kernel instead of the spec's in * stride), and
    ConvTranspose output_shape never exceeds the natural output size (ORT
    then zero-fills at the end, while the spec's pad formula gives a negative
    start pad).
    """

    def keff(kk, dd):
        return (kk - 1) * dd + 1

    def draw(rng, nsp, dmax):
        nsp_range = range(nsp)
        k = [int(rng.integers(1, 5)) for _ in nsp_range]
        s = [int(rng.integers(1, 4)) for _ in nsp_range]
        d = [int(rng.integers(1, dmax + 1)) for _ in nsp_range]
        return k, s, d

    def window_attrs(rng, k, s, d, attrs):
        """Sets pads / auto_pad (adjusting s, d for SAME); returns the attrs."""
        r = rng.random()
        if r < 0.3:
            mode = str(rng.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))
            attrs["auto_pad"] = mode
            if mode != "VALID":
                d[:] = [1] * len(d)
                s[:] = [min(ss, kk) for ss, kk in zip(s, k)]
        elif r < 0.85:
            attrs["pads"] = [int(rng.integers(0, kk)) for kk in k] + [int(rng.integers(0, kk)) for kk in k]
        attrs["strides"] = s
        return attrs

    def in_sizes(rng, k, s, d):
        return tuple(int(rng.integers(keff(kk, dd), keff(kk, dd) + 2 * ss + 3)) for kk, ss, dd in zip(k, s, d))

    rng = w.rng("Conv/random")
    for i in range(n_each):
        nsp = int(rng.choice([1, 2, 2, 2, 3]))
        k, s, d = draw(rng, nsp, dmax=2 if nsp < 3 else 1)
        group = int(rng.choice([1, 1, 2, 3]))
        c, m = group * int(rng.integers(1, 3)), group * int(rng.integers(1, 3))
        attrs = window_attrs(rng, k, s, d, {"kernel_shape": k})
        attrs["dilations"] = d
        if group > 1:
            attrs["group"] = group
        x_shape = (int(rng.integers(1, 3)), c) + in_sizes(rng, k, s, d)
        bias = bool(rng.random() < 0.5)
        inits = {"w": uni(rng, (m, c // group) + tuple(k), -0.5, 0.5)}
        if bias:
            inits["b"] = uni(rng, (m,), -1, 1)
        w.case("Conv", f"random{i}", node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], **attrs),
               {"x": uni(rng, x_shape)}, inits)

    rng = w.rng("ConvTranspose/random")
    for i in range(n_each):
        nsp = int(rng.choice([1, 2, 2, 2, 3]))
        k, s, d = draw(rng, nsp, dmax=2 if nsp < 3 else 1)
        group = int(rng.choice([1, 1, 2]))
        c, mg = group * int(rng.integers(1, 3)), int(rng.integers(1, 3))
        x_sp = [int(rng.integers(2, 6)) for _ in range(nsp)]
        natural = [ss * (xx - 1) + keff(kk, dd) for ss, xx, kk, dd in zip(s, x_sp, k, d)]
        attrs = {"strides": s, "dilations": d}
        r = rng.random()
        if r < 0.25:
            mode = str(rng.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))
            attrs["auto_pad"] = mode
            if mode != "VALID":
                s[:] = [min(ss, keff(kk, dd)) for ss, kk, dd in zip(s, k, d)]
        elif r < 0.45:
            # total padding in [0, min(2 * (keff - 1), natural - 1)]
            attrs["output_shape"] = [nat - int(rng.integers(0, min(2 * (keff(kk, dd) - 1), nat - 1) + 1))
                                     for nat, kk, dd in zip(natural, k, d)]
        else:
            begin = [int(rng.integers(0, keff(kk, dd))) for kk, dd in zip(k, d)]
            end = [int(rng.integers(0, max(1, min(keff(kk, dd), nat - b)))) for kk, dd, nat, b in
                   zip(k, d, natural, begin)]
            attrs["pads"] = begin + end
            attrs["output_padding"] = [int(rng.integers(0, ss)) for ss in s]
        if group > 1:
            attrs["group"] = group
        bias = bool(rng.random() < 0.5)
        inits = {"w": uni(rng, (c, mg) + tuple(k), -0.5, 0.5)}
        if bias:
            inits["b"] = uni(rng, (mg * group,), -1, 1)
        w.case("ConvTranspose", f"random{i}",
               node("ConvTranspose", ["x", "w"] + (["b"] if bias else []), ["y"], **attrs),
               {"x": uni(rng, (int(rng.integers(1, 3)), c) + tuple(x_sp))}, inits)

    for op in ("MaxPool", "AveragePool"):
        rng = w.rng(op + "/random")
        for i in range(n_each):
            nsp = int(rng.choice([1, 2, 2, 2, 3]))
            k, s, d = draw(rng, nsp, dmax=2 if op == "MaxPool" else 1)
            attrs = window_attrs(rng, k, s, d, {"kernel_shape": k})
            if op == "MaxPool":
                attrs["dilations"] = d
            else:
                attrs["count_include_pad"] = int(rng.integers(0, 2))
            if "auto_pad" not in attrs:
                attrs["ceil_mode"] = int(rng.integers(0, 2))
            x_shape = (int(rng.integers(1, 3)), int(rng.integers(1, 4))) + in_sizes(rng, k, s, d)
            w.case(op, f"random{i}", node(op, ["x"], ["y"], **attrs), {"x": uni(rng, x_shape)})


# --------------------------------------------------------------------------
# Linear algebra


def gen_linear(w):
    rng = w.rng("Gemm")
    m, k, n = (int(v) for v in rng.integers(2, 7, size=3))

    def gemm(tag, ta=0, tb=0, c_shape=(n,), b_input=False, c_input=False, **attrs):
        a_shape = (k, m) if ta else (m, k)
        b_shape = (n, k) if tb else (k, n)
        if ta:
            attrs["transA"] = 1
        if tb:
            attrs["transB"] = 1
        inputs = {"a": uni(rng, a_shape)}
        inits = {}
        (inputs if b_input else inits)["b"] = uni(rng, b_shape)
        names = ["a", "b"]
        if c_shape is not None:
            (inputs if c_input else inits)["c"] = uni(rng, c_shape)
            names.append("c")
        w.case("Gemm", tag, node("Gemm", names, ["y"], **attrs), inputs, inits)

    gemm("default")
    gemm("transA", ta=1)
    gemm("transB", tb=1)
    gemm("transAB", ta=1, tb=1)
    gemm("alpha_beta", alpha=0.5, beta=2.0)
    gemm("alpha_beta_transB", tb=1, alpha=-1.5, beta=0.25, c_shape=(m, n))
    gemm("no_c", c_shape=None)
    gemm("no_c_alpha", c_shape=None, alpha=3.0)
    gemm("c_scalar", c_shape=())
    gemm("c_one", c_shape=(1,))
    gemm("c_row", c_shape=(1, n))
    gemm("c_col", c_shape=(m, 1))
    gemm("c_full", c_shape=(m, n))
    gemm("b_input", b_input=True, tb=1)
    gemm("bc_input", b_input=True, c_input=True, c_shape=(m, n), beta=0.5)
    gemm("beta0", beta=0.0)

    rng = w.rng("MatMul")

    def mm(tag, sa, sb, const_b=False):
        a, b = uni(rng, sa), uni(rng, sb)
        inputs, inits = ({"a": a}, {"b": b}) if const_b else ({"a": a, "b": b}, None)
        w.case("MatMul", tag, node("MatMul", ["a", "b"], ["y"]), inputs, inits)

    m, k, n, b1, b2 = (int(v) for v in rng.integers(2, 6, size=5))
    mm("2d", (m, k), (k, n))
    mm("2d_const", (m, k), (k, n), const_b=True)
    mm("3d_2d", (b1, m, k), (k, n), const_b=True)
    mm("3d_3d", (b1, m, k), (b1, k, n))
    mm("bcast_batch", (b1, 1, m, k), (b2, k, n))
    mm("bcast_batch2", (1, b2, m, k), (b1, 1, k, n))
    mm("2d_3d", (m, k), (b1, k, n))
    mm("1d_2d", (k,), (k, n))
    mm("2d_1d", (m, k), (k,))
    mm("1d_3d", (k,), (b1, k, n))
    mm("3d_1d", (b1, m, k), (k,))
    mm("1d_1d", (k,), (k,))
    w.case("MatMul", "i64", node("MatMul", ["a", "b"], ["y"]), {"a": ints(rng, (m, k), -5, 5),
                                                                  "b": ints(rng, (k, n), -5, 5)}, optional=True)


# --------------------------------------------------------------------------
# Normalization


def gen_norm(w):
    rng = w.rng("BatchNormalization")
    for tag, shp, eps, opset in (("r4", (2,) + rshape(rng, 3), 1e-5, 13), ("r2", (3, 5), 1e-3, 13),
                                 ("r3", (2, 4, 6), 1e-5, 13), ("r5", (1, 3, 2, 3, 4), 1e-2, 13),
                                 ("op9", (1, 3, 4, 4), 1e-5, 9), ("op15", (2, 3, 3, 3), 1e-4, 15)):
        c = shp[1]
        w.case("BatchNormalization", tag,
               node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], epsilon=eps),
               {"x": uni(rng, shp, -3, 3)},
               {"scale": uni(rng, (c,), 0.5, 2), "bias": uni(rng, (c,), -1, 1),
                "mean": uni(rng, (c,), -1, 1), "var": uni(rng, (c,), 0.1, 2)}, opset=opset)

    rng = w.rng("InstanceNormalization")
    for tag, shp, eps in (("r4", (2,) + rshape(rng, 3), 1e-5), ("r3", (2, 3, 7), 1e-5),
                          ("eps1e-2", (1, 4, 3, 5), 1e-2), ("r5", (1, 2, 3, 3, 4), 1e-5)):
        c = shp[1]
        w.case("InstanceNormalization", tag,
               node("InstanceNormalization", ["x", "scale", "bias"], ["y"], epsilon=eps),
               {"x": uni(rng, shp, -3, 3)}, {"scale": uni(rng, (c,), 0.5, 2), "bias": uni(rng, (c,), -1, 1)})

    rng = w.rng("LayerNormalization")
    for tag, shp, axis, bias, eps in (("last", (2, 3, 8), -1, True, 1e-5), ("last_nobias", (4, 6), -1, False, 1e-5),
                                      ("axis1", (2, 3, 4), 1, True, 1e-5), ("axis_m2", (2, 2, 3, 4), -2, True, 1e-3),
                                      ("axis0", (3, 4), 0, True, 1e-5), ("default_axis", (3, 5), None, True, 1e-5),
                                      ("r1", (10,), -1, True, 1e-5)):
        attrs = {"epsilon": eps}
        if axis is not None:
            attrs["axis"] = axis
        nshape = shp[(axis if axis is not None else -1):]
        if axis == 0:
            nshape = shp
        names = ["x", "scale"] + (["bias"] if bias else [])
        inits = {"scale": uni(rng, nshape, 0.5, 2)}
        if bias:
            inits["bias"] = uni(rng, nshape, -1, 1)
        w.case("LayerNormalization", tag, node("LayerNormalization", names, ["y"], **attrs),
               {"x": uni(rng, shp, -3, 3)}, inits, opset=17)

    rng = w.rng("GroupNormalization")
    for tag, shp, groups, eps in (("g2", (2, 4, 3, 3), 2, 1e-5), ("g_eq_c", (1, 4, 2, 5), 4, 1e-5),
                                  ("g1", (2, 6, 3, 2), 1, 1e-5), ("r3_g3", (2, 6, 5), 3, 1e-3)):
        w.case("GroupNormalization", tag,
               node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=groups, epsilon=eps),
               {"x": uni(rng, shp, -3, 3)}, {"scale": uni(rng, (groups,), 0.5, 2), "bias": uni(rng, (groups,), -1, 1)},
               opset=18, op_optional=True)
    for tag, shp, groups in (("op21_g2", (2, 4, 3, 3), 2), ("op21_g3", (1, 6, 4), 3)):
        c = shp[1]
        w.case("GroupNormalization", tag,
               node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=groups),
               {"x": uni(rng, shp, -3, 3)}, {"scale": uni(rng, (c,), 0.5, 2), "bias": uni(rng, (c,), -1, 1)},
               opset=21, optional=True)

    for op in ("Softmax", "LogSoftmax"):
        rng = w.rng(op)
        s = rshape(rng, 3, 2, 6)
        for tag, axis in (("default", None), ("axis_m1", -1), ("axis0", 0), ("axis1", 1), ("axis_m2", -2)):
            attrs = {} if axis is None else {"axis": axis}
            w.case(op, tag, node(op, ["x"], ["y"], **attrs), {"x": uni(rng, s, -4, 4)})
        w.case(op, "r1", node(op, ["x"], ["y"]), {"x": uni(rng, (9,), -4, 4)})
        w.case(op, "r4_axis2", node(op, ["x"], ["y"], axis=2), {"x": uni(rng, (2, 3, 4, 5), -4, 4)})
        w.case(op, "large_vals", node(op, ["x"], ["y"]), {"x": uni(rng, (3, 6), 50, 90)})
        # Opset <= 12: the input is coerced to 2D at `axis` (default 1).
        w.case(op, "op11_axis1_r3", node(op, ["x"], ["y"], axis=1), {"x": uni(rng, s, -4, 4)}, opset=11)
        w.case(op, "op11_default_r4", node(op, ["x"], ["y"]), {"x": uni(rng, (2, 3, 2, 2), -4, 4)}, opset=11)
        w.case(op, "op11_axis_m1", node(op, ["x"], ["y"], axis=-1), {"x": uni(rng, s, -4, 4)}, opset=11)


# --------------------------------------------------------------------------
# Reductions


REDUCE_OPS = ("ReduceL2", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")


def gen_reduce(w):
    for op in REDUCE_OPS:
        rng = w.rng(op)
        lo, hi = (0.6, 1.5) if op == "ReduceProd" else (-3, 3)
        s = rshape(rng, 4, 2, 5)
        x = lambda: uni(rng, s, lo, hi)  # noqa: E731
        axes_input = op == "ReduceSum"  # ReduceSum-13 takes axes as an input, the rest from opset 18.

        def red(tag, axes, keepdims=None, opset=13, as_input=None, **extra):
            attrs = dict(extra)
            if keepdims is not None:
                attrs["keepdims"] = keepdims
            inp = axes_input if as_input is None else as_input
            names = ["x"]
            inits = {}
            if axes is not None:
                if inp:
                    names.append("axes")
                    inits["axes"] = i64(axes)
                else:
                    attrs["axes"] = list(axes)
            w.case(op, tag, node(op, names, ["y"], **attrs), {"x": x()}, inits, opset=opset)

        red("all_default", None)
        red("all_keep0", None, 0)
        red("axis_m1_keep1", [-1], 1)
        red("axis_m1_keep0", [-1], 0)
        red("axis0_keep1", [0], 1)
        red("axes_1_3_keep0", [1, 3], 0)
        red("axes_m3_2_keep1", [-3, 2], 1)
        red("axes_all_explicit_keep0", [0, 1, 2, 3], 0)
        if op == "ReduceSum":
            red("op11_attr_axes", [1, -1], 0, opset=11, as_input=False)
            red("noop_empty_axes", None, 1, noop_with_empty_axes=1)
        else:
            red("op18_axes_input", [-2], 0, opset=18, as_input=True)
            red("op18_no_axes", None, 1, opset=18, as_input=True)
            red("op18_noop_empty", None, 1, opset=18, as_input=True, noop_with_empty_axes=1)
        w.case(op, "r1_keep0", node(op, ["x"], ["y"], keepdims=0), {"x": uni(rng, (7,), lo, hi)})
        if op in ("ReduceMax", "ReduceMin", "ReduceSum"):
            names = ["x", "axes"] if axes_input else ["x"]
            attrs = {"keepdims": 0} if axes_input else {"keepdims": 0, "axes": [1]}
            w.case(op, "i64", node(op, names, ["y"], **attrs), {"x": ints(rng, s)},
                   {"axes": i64([1])} if axes_input else None, optional=True)

    rng = w.rng("ArgMax")
    s = rshape(rng, 3, 3, 6)
    for tag, attrs, x in (("default", {}, uni(rng, s)), ("axis_m1_keep0", {"axis": -1, "keepdims": 0}, uni(rng, s)),
                          ("axis1_keep1", {"axis": 1, "keepdims": 1}, uni(rng, s)),
                          ("axis2", {"axis": 2}, uni(rng, s)),
                          ("ties_first", {"axis": 1}, small_ints_f(rng, s, 0, 2)),
                          ("ties_last", {"axis": 1, "select_last_index": 1}, small_ints_f(rng, s, 0, 2)),
                          ("ties_last_keep0", {"axis": -1, "keepdims": 0, "select_last_index": 1},
                           small_ints_f(rng, s, 0, 1)),
                          ("r1", {"keepdims": 0}, uni(rng, (8,)))):
        w.case("ArgMax", tag, node("ArgMax", ["x"], ["y"], **attrs), {"x": x})
    w.case("ArgMax", "i64", node("ArgMax", ["x"], ["y"], axis=0), {"x": ints(rng, s, -3, 3)}, optional=True)


# --------------------------------------------------------------------------
# Layout / shape ops


def gen_layout(w):
    rng = w.rng("Concat")
    s = rshape(rng, 3)
    for tag, axis, n in (("axis0", 0, 2), ("axis1", 1, 3), ("axis_m1", -1, 2), ("axis_m3", -3, 4)):
        ax = axis % 3
        shapes = [tuple(int(rng.integers(1, 5)) if d == ax else s[d] for d in range(3)) for _ in range(n)]
        names = [f"x{i}" for i in range(n)]
        w.case("Concat", tag, node("Concat", names, ["y"], axis=axis),
               OrderedDict((nm, uni(rng, sh)) for nm, sh in zip(names, shapes)))
    w.case("Concat", "const_input", node("Concat", ["x0", "c", "x1"], ["y"], axis=1),
           {"x0": uni(rng, (2, 3)), "x1": uni(rng, (2, 1))}, {"c": uni(rng, (2, 4))})
    w.case("Concat", "r1", node("Concat", ["x0", "x1"], ["y"], axis=0), {"x0": uni(rng, (3,)), "x1": uni(rng, (5,))})
    w.case("Concat", "single", node("Concat", ["x0"], ["y"], axis=1), {"x0": uni(rng, (2, 3))})
    w.case("Concat", "same_twice", node("Concat", ["x0", "x0"], ["y"], axis=-1), {"x0": uni(rng, (2, 3))})
    w.case("Concat", "i64", node("Concat", ["x0", "x1"], ["y"], axis=0),
           {"x0": ints(rng, (2, 3)), "x1": ints(rng, (1, 3))})

    rng = w.rng("Flatten")
    s = rshape(rng, 4)
    for axis in (None, 0, 1, 2, 3, 4, -1, -3):
        tag = "default" if axis is None else (f"axis{axis}" if axis >= 0 else f"axis_m{-axis}")
        attrs = {} if axis is None else {"axis": axis}
        w.case("Flatten", tag, node("Flatten", ["x"], ["y"], **attrs), {"x": uni(rng, s)})

    rng = w.rng("Reshape")
    s = rshape(rng, 4)
    total = int(np.prod(s))
    for tag, shape in (("flat", [total]), ("minus1", [s[0], -1]), ("zero_copy", [0, 0, -1]),
                       ("zero_and_minus1", [0, -1, s[3]]), ("expand_dims", [1, s[0], s[1], 1, s[2] * s[3]]),
                       ("to_r2", [s[0] * s[1], s[2] * s[3]])):
        w.case("Reshape", tag, node("Reshape", ["x", "shape"], ["y"]), {"x": uni(rng, s)}, {"shape": i64(shape)})
    w.case("Reshape", "to_scalar", node("Reshape", ["x", "shape"], ["y"]), {"x": uni(rng, (1, 1))},
           {"shape": np.zeros((0,), I64)})
    w.case("Reshape", "i64", node("Reshape", ["x", "shape"], ["y"]), {"x": ints(rng, (2, 6))}, {"shape": i64([3, -1])})

    rng = w.rng("Transpose")
    s = rshape(rng, 4)
    w.case("Transpose", "default", node("Transpose", ["x"], ["y"]), {"x": uni(rng, s)})
    perms = []
    while len(perms) < 3:
        perm = [int(v) for v in rng.permutation(4)]
        if perm not in perms and perm != [0, 1, 2, 3]:
            perms.append(perm)
    for perm in perms:
        w.case("Transpose", "perm" + "".join(map(str, perm)), node("Transpose", ["x"], ["y"], perm=perm),
               {"x": uni(rng, s)})
    w.case("Transpose", "r2", node("Transpose", ["x"], ["y"], perm=[1, 0]), {"x": uni(rng, (3, 5))})
    w.case("Transpose", "r5", node("Transpose", ["x"], ["y"], perm=[0, 3, 1, 4, 2]), {"x": uni(rng, (2, 3, 2, 4, 2))})
    w.case("Transpose", "identity_perm", node("Transpose", ["x"], ["y"], perm=[0, 1, 2]), {"x": uni(rng, (2, 3, 4))})
    w.case("Transpose", "bool", node("Transpose", ["x"], ["y"], perm=[1, 0]), {"x": bools(rng, (3, 4))})

    rng = w.rng("Squeeze")
    x = uni(rng, (1, 3, 1, 4, 1))
    w.case("Squeeze", "op13_axes", node("Squeeze", ["x", "axes"], ["y"]), {"x": x}, {"axes": i64([2])})
    w.case("Squeeze", "op13_neg_axes", node("Squeeze", ["x", "axes"], ["y"]), {"x": x}, {"axes": i64([-1, 0])})
    w.case("Squeeze", "op13_all", node("Squeeze", ["x"], ["y"]), {"x": x})
    w.case("Squeeze", "op13_to_scalar", node("Squeeze", ["x"], ["y"]), {"x": uni(rng, (1, 1))})
    w.case("Squeeze", "op11_attr_axes", node("Squeeze", ["x"], ["y"], axes=[0, -3]), {"x": x}, opset=11)
    w.case("Squeeze", "op11_all", node("Squeeze", ["x"], ["y"]), {"x": x}, opset=11)

    rng = w.rng("Unsqueeze")
    x = uni(rng, rshape(rng, 3))
    for tag, axes in (("axis0", [0]), ("axis_m1", [-1]), ("two", [0, 4]), ("unsorted", [3, 1]), ("neg_two", [-1, -5])):
        w.case("Unsqueeze", "op13_" + tag, node("Unsqueeze", ["x", "axes"], ["y"]), {"x": x}, {"axes": i64(axes)})
    w.case("Unsqueeze", "op11_attr", node("Unsqueeze", ["x"], ["y"], axes=[1, -1]), {"x": x}, opset=11)
    w.case("Unsqueeze", "scalar", node("Unsqueeze", ["x", "axes"], ["y"]), {"x": np.array(1.5, F32)},
           {"axes": i64([0])})

    rng = w.rng("Split")
    s = (int(rng.integers(2, 4)), 7, int(rng.integers(2, 5)))
    x = uni(rng, s)
    o3 = ["y0", "y1", "y2"]
    w.case("Split", "op11_attr_uneven", node("Split", ["x"], o3, axis=1, split=[2, 4, 1]), {"x": x}, opset=11)
    w.case("Split", "op11_equal", node("Split", ["x"], ["y0", "y1"], axis=-1), {"x": uni(rng, (3, 4, 6))}, opset=11)
    w.case("Split", "op13_input_uneven", node("Split", ["x", "split"], o3, axis=1), {"x": x}, {"split": i64([3, 1, 3])})
    w.case("Split", "op13_neg_axis", node("Split", ["x", "split"], ["y0", "y1"], axis=-2), {"x": x},
           {"split": i64([5, 2])})
    w.case("Split", "op13_equal", node("Split", ["x"], o3, axis=0), {"x": uni(rng, (6, 2, 3))})
    w.case("Split", "op13_one_output", node("Split", ["x"], ["y0"], axis=1), {"x": x})
    w.case("Split", "op13_zero_part", node("Split", ["x", "split"], o3, axis=1), {"x": x}, {"split": i64([3, 0, 4])},
           optional=True)
    w.case("Split", "op18_num_outputs_uneven", node("Split", ["x"], o3, axis=1, num_outputs=3), {"x": x},
           opset=18, optional=True)
    w.case("Split", "op18_num_outputs_even", node("Split", ["x"], ["y0", "y1"], axis=-1, num_outputs=2),
           {"x": uni(rng, (3, 4))}, opset=18, optional=True)

    rng = w.rng("Slice")
    s = (int(rng.integers(4, 7)), int(rng.integers(5, 8)), int(rng.integers(3, 6)))
    x = uni(rng, s)

    def sl(tag, starts, ends, axes=None, steps=None, opset=13):
        names = ["x", "starts", "ends"]
        inits = {"starts": i64(starts), "ends": i64(ends)}
        if axes is not None:
            names.append("axes")
            inits["axes"] = i64(axes)
        if steps is not None:
            if axes is None:
                names.append("")
            names.append("steps")
            inits["steps"] = i64(steps)
        w.case("Slice", tag, node("Slice", names, ["y"]), {"x": x}, inits, opset=opset)

    sl("basic", [1, 0], [3, 4], [0, 1])
    sl("no_axes", [0, 1, 1], [2, 4, 3])
    sl("neg_starts", [-3], [INT64_MAX], [1])
    sl("neg_ends", [1, 0], [-1, -2], [0, 2])
    sl("neg_axes", [1], [3], [-1])
    sl("steps2", [0, 1], [INT64_MAX, 100], [1, 2], [2, 3])
    sl("neg_step_full", [-1], [INT64_MIN], [1], [-1])
    sl("neg_step2", [4], [0], [1], [-2])
    sl("neg_step_both", [-2, 100], [-100, 0], [0, -1], [-1, -2])
    sl("clamp", [-100, 2], [100, 1000], [0, 2])
    sl("steps_no_axes", [0, 0, 0], [100, 100, 100], None, [1, 2, 2])
    sl("unsorted_axes", [1, 0], [3, 2], [2, 0])
    sl("op10_steps", [0, -1], [3, INT64_MIN], [0, 1], [1, -2], opset=10)
    sl("empty", [3], [1], [0])
    w.case("Slice", "op9_attrs", node("Slice", ["x"], ["y"], starts=[1, -3], ends=[100, -1], axes=[0, 2]),
           {"x": x}, opset=9)
    w.case("Slice", "op9_no_axes", node("Slice", ["x"], ["y"], starts=[0, 1], ends=[2, 3]), {"x": x}, opset=9)

    rng = w.rng("Gather")
    s = rshape(rng, 3, 3, 6)
    d = uni(rng, s)
    g = lambda tag, idx, axis=None, idx_input=False, data=d: w.case(  # noqa: E731
        "Gather", tag, node("Gather", ["d", "i"], ["y"], **({} if axis is None else {"axis": axis})),
        {"d": data, "i": idx} if idx_input else {"d": data}, None if idx_input else {"i": idx})
    g("axis0_1d", i64([0, s[0] - 1, 1]))
    g("axis1_neg", i64([-1, 0, -s[1]]), 1)
    g("axis_m1_2d", i64([[0, 1], [-1, 2]]), -1)
    g("scalar_idx", np.array(1, I64), 1)
    g("scalar_neg_idx", np.array(-1, I64), 0)
    g("repeat", i64([2, 2, 0, 2]), 2)
    g("idx_input", i64([[1, -2, 0]]), 1, idx_input=True)
    g("idx_i32", np.array([1, -1], np.int32), 0)
    g("i64_data", i64([1, 0]), 0, data=ints(rng, (3, 4)))
    g("r1_data", i64([3, -2, 0]), 0, data=uni(rng, (6,)))

    rng = w.rng("Tile")
    for tag, shp, reps in (("r3", rshape(rng, 3), [2, 1, 3]), ("r2_ones", (3, 4), [1, 1]), ("r1", (5,), [3]),
                           ("r4", (1, 2, 3, 2), [2, 3, 1, 2])):
        w.case("Tile", tag, node("Tile", ["x", "r"], ["y"]), {"x": uni(rng, shp)}, {"r": i64(reps)})
    w.case("Tile", "i64", node("Tile", ["x", "r"], ["y"]), {"x": ints(rng, (2, 3))}, {"r": i64([2, 2])})

    rng = w.rng("Expand")
    for tag, shp, target in (("basic", (3, 1), [2, 3, 4]), ("bidir", (1, 4), [3, 1]), ("smaller_shape", (2, 3), [1, 1]),
                             ("rank_up", (4,), [2, 3, 4]), ("same", (2, 3), [2, 3]), ("scalar", (), [2, 2]),
                             ("mid_ones", (2, 1, 3, 1), [2, 4, 3, 5])):
        w.case("Expand", tag, node("Expand", ["x", "s"], ["y"]), {"x": uni(rng, shp)}, {"s": i64(target)})
    w.case("Expand", "bool", node("Expand", ["x", "s"], ["y"]), {"x": bools(rng, (3, 1))}, {"s": i64([3, 3])})

    rng = w.rng("Pad")
    x4 = uni(rng, (1, 2, 4, 5))
    x2 = uni(rng, (4, 5))
    w.case("Pad", "op7_constant", node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 2, 1], value=1.5),
           {"x": x4}, opset=7)
    w.case("Pad", "op7_reflect", node("Pad", ["x"], ["y"], mode="reflect", pads=[0, 0, 2, 1, 0, 0, 1, 3]),
           {"x": x4}, opset=7)
    w.case("Pad", "op7_edge", node("Pad", ["x"], ["y"], mode="edge", pads=[1, 2, 2, 0]), {"x": x2}, opset=7)
    w.case("Pad", "op11_constant", node("Pad", ["x", "p", "v"], ["y"]), {"x": x4},
           {"p": i64([0, 1, 1, 0, 0, 0, 2, 3]), "v": np.array(-2.0, F32)}, opset=11)
    w.case("Pad", "op11_reflect", node("Pad", ["x", "p"], ["y"], mode="reflect"), {"x": x2},
           {"p": i64([3, 1, 2, 4])}, opset=11)
    w.case("Pad", "op11_edge", node("Pad", ["x", "p"], ["y"], mode="edge"), {"x": x4},
           {"p": i64([0, 0, 3, 1, 0, 0, 0, 2])}, opset=11)
    w.case("Pad", "op13_constant_default", node("Pad", ["x", "p"], ["y"]), {"x": x4},
           {"p": i64([0, 0, 1, 1, 0, 0, 1, 1])})
    w.case("Pad", "op13_negative", node("Pad", ["x", "p", "v"], ["y"]), {"x": x4},
           {"p": i64([0, 0, -1, 2, 0, 0, 1, -2]), "v": np.array(0.5, F32)})
    w.case("Pad", "op13_reflect_r3", node("Pad", ["x", "p"], ["y"], mode="reflect"), {"x": uni(rng, (2, 5, 4))},
           {"p": i64([1, 2, 3, 0, 4, 1])})
    w.case("Pad", "op13_edge_r1", node("Pad", ["x", "p"], ["y"], mode="edge"), {"x": uni(rng, (5,))},
           {"p": i64([3, 4])})
    w.case("Pad", "op13_edge_r2", node("Pad", ["x", "p"], ["y"], mode="edge"), {"x": x2},
           {"p": i64([4, 0, 1, 6])})
    w.case("Pad", "op13_i64", node("Pad", ["x", "p", "v"], ["y"]), {"x": ints(rng, (3, 4))},
           {"p": i64([1, 0, 0, 2]), "v": np.array(7, I64)})
    w.case("Pad", "op18_axes", node("Pad", ["x", "p", "v", "a"], ["y"]), {"x": x4},
           {"p": i64([1, 2, 0, 1]), "v": np.array(0.25, F32), "a": i64([-1, 2])}, opset=18, optional=True)

    rng = w.rng("DepthToSpace")
    for tag, shp, bs, mode in (("dcr_b2", (1, 8, 2, 3), 2, "DCR"), ("crd_b2", (2, 8, 3, 2), 2, "CRD"),
                               ("dcr_b3", (1, 9, 2, 2), 3, "DCR"), ("crd_b3", (1, 18, 2, 1), 3, "CRD"),
                               ("default_mode", (1, 4, 3, 3), 2, None)):
        attrs = {"blocksize": bs}
        if mode:
            attrs["mode"] = mode
        w.case("DepthToSpace", tag, node("DepthToSpace", ["x"], ["y"], **attrs), {"x": uni(rng, shp)})
    rng = w.rng("SpaceToDepth")
    for tag, shp, bs in (("b2", (1, 3, 4, 6), 2), ("b3", (2, 2, 6, 3), 3), ("b2_n2", (2, 1, 2, 4), 2)):
        w.case("SpaceToDepth", tag, node("SpaceToDepth", ["x"], ["y"], blocksize=bs), {"x": uni(rng, shp)})

    rng = w.rng("ScatterND")
    data = uni(rng, (4, 5, 3))
    for tag, idx, upd_shape, opset, attrs in (
            ("elements", i64([[0, 1, 2], [3, 4, 0]]), (2,), 13, {}),
            ("rows", i64([[1], [3]]), (2, 5, 3), 13, {}),
            ("slices", i64([[2, 1], [0, 4], [3, 0]]), (3, 3), 13, {}),
            ("neg_idx", i64([[-1, -2]]), (1, 3), 13, {}),
            ("box", i64([[[1, 1], [1, 2]], [[2, 1], [2, 2]]]), (2, 2, 3), 13, {}),
            ("box_last_axis", i64([[[r, c, z] for z in (1, 2)] for r in range(4) for c in range(5)]), (20, 2), 13, {}),
            ("reduction_add", i64([[1], [1]]), (2, 5, 3), 16, {"reduction": "add"}),
            ("reduction_mul", i64([[0, 0], [2, 3]]), (2, 3), 16, {"reduction": "mul"})):
        w.case("ScatterND", tag, [node("ScatterND", ["d", "i", "u"], ["s"], **attrs), node("Add", ["s", "x"], ["y"])],
               {"x": uni(rng, data.shape)}, {"d": data, "i": idx, "u": uni(rng, upd_shape)}, opset=opset,
               op_optional=(tag == "elements"), optional=bool(attrs))


# --------------------------------------------------------------------------
# Resize / Upsample


def gen_resize(w):
    rng = w.rng("Resize")
    x = uni(rng, (1, 2, 4, 5))
    x_small = uni(rng, (2, 3, 3, 4))
    x_ac = uni(rng, (1, 2, 4, 8))

    def rs(tag, attrs, scales=None, sizes=None, roi=None, opset=13, data=x):
        names = ["x"]
        inits = {}
        if opset == 11 or roi is not None:
            names.append("roi")
            inits["roi"] = f32c(roi if roi is not None else [])
        else:
            names.append("")
        if scales is not None:
            names.append("scales")
            inits["scales"] = f32c(scales)
        elif opset == 11:
            names.append("scales")
            inits["scales"] = f32c([])
        else:
            names.append("")
        if sizes is not None:
            names.append("sizes")
            inits["sizes"] = i64(sizes)
        w.case("Resize", tag, node("Resize", names, ["y"], **attrs), {"x": data}, inits, opset=opset)

    up2 = [1, 1, 2, 2]
    frac = [1, 1, 1.5, 1.7]  # 4x5 -> 6x8 (5 * 1.7 = 8.5 is truncated)
    down = [1, 1, 0.6, 0.5]  # 4x5 -> 2x2 (2.4, 2.5 truncated)
    # align_corners divides by (output length - 1).  When scale * input length
    # is fractional, onnxruntime uses the integer output length while the ONNX
    # reference implementation (and korch) use the fractional one; onnxruntime
    # lists test_resize_downsample_scales_{linear,cubic}_align_corners as
    # "results mismatch with onnx tests".  So align_corners cases use scales
    # that give whole output lengths (exact in float32) on x_ac (4x8).
    frac_ac = [1, 1, 1.5, 1.25]  # 4x8 -> 6x10
    down_ac = [1, 1, 0.5, 0.375]  # 4x8 -> 2x3
    # nearest
    rs("nearest_default_up2", {"mode": "nearest"}, up2)
    for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        for ct in ("asymmetric", "half_pixel", "align_corners"):
            ac = ct == "align_corners"
            rs(f"nearest_{nm}_{ct}_frac", {"mode": "nearest", "nearest_mode": nm,
                                           "coordinate_transformation_mode": ct},
               frac_ac if ac else frac, data=x_ac if ac else x)
    rs("nearest_down", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
       down)
    rs("nearest_sizes", {"mode": "nearest"}, sizes=[1, 2, 7, 3])
    rs("nearest_chan_scale", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                              "nearest_mode": "floor"}, [1, 2, 1, 2])
    rs("nearest_pytorch_half_pixel", {"mode": "nearest", "coordinate_transformation_mode": "pytorch_half_pixel"},
       frac)
    rs("op11_nearest_tf_half_pixel_for_nn", {"mode": "nearest",
                                             "coordinate_transformation_mode": "tf_half_pixel_for_nn"}, frac, opset=11)
    # linear
    for ct in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
        rs(f"linear_{ct}_up2", {"mode": "linear", "coordinate_transformation_mode": ct}, up2)
        ac = ct == "align_corners"
        rs(f"linear_{ct}_frac", {"mode": "linear", "coordinate_transformation_mode": ct},
           frac_ac if ac else frac, data=x_ac if ac else x)
        rs(f"linear_{ct}_down", {"mode": "linear", "coordinate_transformation_mode": ct},
           down_ac if ac else down, data=x_ac if ac else x)
        rs(f"linear_{ct}_sizes", {"mode": "linear", "coordinate_transformation_mode": ct}, sizes=[1, 2, 3, 7])
    rs("linear_default_sizes", {"mode": "linear"}, sizes=[1, 2, 6, 3])
    rs("linear_pytorch_half_pixel_size1", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
       sizes=[1, 2, 1, 3])
    rs("linear_tf_crop_and_resize", {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"},
       sizes=[1, 2, 5, 3], roi=[0, 0, 0.2, 0.1, 1, 1, 0.9, 0.7])
    rs("linear_tf_crop_extrapolate", {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                                      "extrapolation_value": -3.0},
       sizes=[1, 2, 3, 6], roi=[0, 0, -0.2, 0.3, 1, 1, 1.3, 1.2])
    # (tf_crop_and_resize: every resized axis changes length, since onnxruntime
    # ignores the roi of an axis whose length stays the same.)
    rs("linear_n2", {"mode": "linear"}, up2, data=x_small)
    # cubic
    for ct in ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"):
        ac = ct == "align_corners"
        rs(f"cubic_{ct}_frac", {"mode": "cubic", "coordinate_transformation_mode": ct},
           frac_ac if ac else frac, data=x_ac if ac else x)
    rs("cubic_a_m0p5", {"mode": "cubic", "cubic_coeff_a": -0.5}, up2)
    rs("cubic_exclude_outside", {"mode": "cubic", "exclude_outside": 1}, frac)
    rs("cubic_a_m0p5_exclude_down", {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, down)
    rs("cubic_sizes", {"mode": "cubic"}, sizes=[1, 2, 9, 4])
    # opset 11 (roi and scales are required inputs, possibly empty)
    rs("op11_nearest", {"mode": "nearest"}, up2, opset=11)
    rs("op11_linear_align_corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, frac_ac,
       opset=11, data=x_ac)
    rs("op11_sizes", {"mode": "linear"}, sizes=[1, 2, 3, 8], opset=11)
    rs("op11_cubic", {"mode": "cubic"}, up2, opset=11)
    # opset 18 / 19 additions
    rs("op18_linear_antialias_down", {"mode": "linear", "antialias": 1}, down, opset=18)
    rs("op19_half_pixel_symmetric", {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
       frac, opset=19)

    rng = w.rng("Upsample")
    for tag, mode, scales, shp in (("nearest_2x", "nearest", [1, 1, 2, 2], (1, 2, 3, 4)),
                                   ("nearest_2x3", "nearest", [1, 1, 2, 3], (2, 1, 3, 3)),
                                   ("nearest_frac", "nearest", [1, 1, 1.5, 2.5], (1, 2, 4, 3)),
                                   ("linear_2x", "linear", [1, 1, 2, 2], (1, 2, 3, 4)),
                                   ("linear_frac", "linear", [1, 1, 1.5, 2.0], (1, 1, 4, 3)),
                                   ("default_mode", None, [1, 1, 3, 1], (1, 2, 2, 3))):
        attrs = {"mode": mode} if mode else {}
        w.case("Upsample", tag, node("Upsample", ["x", "scales"], ["y"], **attrs), {"x": uni(rng, shp)},
               {"scales": f32c(scales)}, opset=9)


# --------------------------------------------------------------------------
# Constant-producing ops and miscellany


def gen_misc(w):
    rng = w.rng("Constant")
    s = (3, 4)
    val = uni(rng, s)
    for tag, attrs, x in (
            ("value_tensor", {"value": numpy_helper.from_array(val, "c")}, uni(rng, s)),
            ("value_tensor_bcast", {"value": numpy_helper.from_array(uni(rng, (4,)), "c")}, uni(rng, s)),
            ("value_float", {"value_float": 2.5}, uni(rng, s)),
            ("value_floats", {"value_floats": [1.0, -2.0, 0.5, 4.0]}, uni(rng, s)),
            ("value_int", {"value_int": 7}, ints(rng, s)),
            ("value_ints", {"value_ints": [1, 2, 3, 4]}, ints(rng, s)),
            ("value_tensor_i64", {"value": numpy_helper.from_array(ints(rng, s), "c")}, ints(rng, s))):
        w.case("Constant", tag, [node("Constant", [], ["c"], **attrs), node("Add", ["x", "c"], ["y"])], {"x": x})
    w.case("Constant", "output_directly", [node("Constant", [], ["c"], value=numpy_helper.from_array(val, "c")),
                                           node("Identity", ["x"], ["y"])], {"x": uni(rng, s)}, outputs=["c", "y"])

    rng = w.rng("ConstantOfShape")
    for tag, shape, value, x in (
            ("default_value", [2, 3], None, uni(rng, (2, 3))),
            ("float", [3, 1, 4], numpy_helper.from_array(f32c([1.5]), "v"), uni(rng, (3, 2, 4))),
            ("i64", [2, 5], numpy_helper.from_array(i64([7]), "v"), ints(rng, (2, 5))),
            ("r1", [6], numpy_helper.from_array(f32c([-0.5]), "v"), uni(rng, (6,)))):
        attrs = {} if value is None else {"value": value}
        w.case("ConstantOfShape", tag, [node("ConstantOfShape", ["s"], ["c"], **attrs), node("Add", ["x", "c"], ["y"])],
               {"x": x}, {"s": i64(shape)})
    w.case("ConstantOfShape", "of_shape", [node("Shape", ["x"], ["s"]),
                                           node("ConstantOfShape", ["s"], ["c"],
                                                value=numpy_helper.from_array(f32c([2.0]), "v")),
                                           node("Mul", ["x", "c"], ["y"])], {"x": uni(rng, (2, 3, 4))})
    w.case("ConstantOfShape", "bool", [node("ConstantOfShape", ["s"], ["c"],
                                            value=numpy_helper.from_array(np.array([True]), "v")),
                                       node("And", ["x", "c"], ["y"])], {"x": bools(rng, (3, 4))}, {"s": i64([3, 4])})

    rng = w.rng("Range")
    for tag, start, limit, delta in (
            ("f32", np.array(0.0, F32), np.array(5.0, F32), np.array(0.5, F32)),
            ("f32_neg_delta", np.array(3.0, F32), np.array(-1.0, F32), np.array(-0.7, F32)),
            ("i64", np.array(2, I64), np.array(11, I64), np.array(3, I64)),
            ("i64_neg_delta", np.array(10, I64), np.array(1, I64), np.array(-3, I64)),
            ("i64_unit", np.array(-4, I64), np.array(4, I64), np.array(1, I64))):
        n = int(max(np.ceil((limit - start) / delta), 0))  # in the op's own type, as the spec says
        x = uni(rng, (2, n)) if start.dtype == F32 else ints(rng, (2, n))
        w.case("Range", tag, [node("Range", ["s", "l", "d"], ["r"]), node("Add", ["x", "r"], ["y"])],
               {"x": x}, {"s": start, "l": limit, "d": delta})

    rng = w.rng("Shape")
    w.case("Shape", "r4", node("Shape", ["x"], ["y"]), {"x": uni(rng, rshape(rng, 4))})
    w.case("Shape", "r1", node("Shape", ["x"], ["y"]), {"x": uni(rng, (5,))})
    w.case("Shape", "scalar", node("Shape", ["x"], ["y"]), {"x": np.array(1.0, F32)})
    w.case("Shape", "op15_start1", node("Shape", ["x"], ["y"], start=1), {"x": uni(rng, (2, 3, 4))}, opset=15)
    w.case("Shape", "op15_start_end_neg", node("Shape", ["x"], ["y"], start=-3, end=-1), {"x": uni(rng, (2, 3, 4, 5))},
           opset=15)
    w.case("Shape", "to_reshape", [node("Shape", ["x"], ["s"]), node("Reshape", ["z", "s"], ["y"])],
           {"x": uni(rng, (2, 6)), "z": uni(rng, (3, 4))})

    rng = w.rng("Size")
    w.case("Size", "r3", node("Size", ["x"], ["y"]), {"x": uni(rng, (2, 3, 4))})
    w.case("Size", "add", [node("Size", ["x"], ["n"]), node("Add", ["n", "k"], ["y"])],
           {"x": uni(rng, (3, 5)), "k": ints(rng, (2,))})

    rng = w.rng("Dropout")
    s = rshape(rng, 3)
    w.case("Dropout", "op13_plain", node("Dropout", ["x"], ["y"]), {"x": uni(rng, s)})
    w.case("Dropout", "op13_ratio", node("Dropout", ["x", "r"], ["y"]), {"x": uni(rng, s)}, {"r": np.array(0.3, F32)})
    w.case("Dropout", "op13_training_false", node("Dropout", ["x", "r", "t"], ["y"]), {"x": uni(rng, s)},
           {"r": np.array(0.5, F32), "t": np.array(False)})
    w.case("Dropout", "op13_mask", node("Dropout", ["x"], ["y", "mask"]), {"x": uni(rng, s)})
    w.case("Dropout", "op10_ratio_attr", node("Dropout", ["x"], ["y"], ratio=0.2), {"x": uni(rng, s)}, opset=10)


def gen_edges(w):
    """Edge cases: special float values, zero-size tensors, maximal pads, extra Resize forms."""
    rng = w.rng("edges")
    x = uni(rng, (3, 4))
    z = f32c([[1.0, -2.0, 0.0, 3.0], [0.0, 0.5, -1.0, 0.0], [2.0, 0.0, 0.0, -4.0]])
    w.case("Div", "edge_by_zero", node("Div", ["a", "b"], ["y"]), {"a": z[::-1].copy(), "b": z})
    w.case("Reciprocal", "edge_zero", node("Reciprocal", ["x"], ["y"]), {"x": z})
    w.case("Log", "edge_zero_negative", node("Log", ["x"], ["y"]), {"x": z})
    w.case("Sqrt", "edge_negative", node("Sqrt", ["x"], ["y"]), {"x": z})
    w.case("Pow", "edge_zero_base", node("Pow", ["a", "b"], ["y"]), {"a": np.abs(z), "b": uni(rng, (4,), -1, 2)})
    w.case("Softmax", "edge_inf", node("Softmax", ["x"], ["y"]),
           {"x": f32c([[0.0, -np.inf, 1.0], [-np.inf, 2.0, 3.0]])})
    w.case("Relu", "edge_inf", node("Relu", ["x"], ["y"]), {"x": f32c([np.inf, -np.inf, 0.0, -0.0, 1e30])})

    # Zero-size tensors (valid ONNX; korch should carry them through).
    w.case("Concat", "edge_empty_input", node("Concat", ["x0", "c"], ["y"], axis=1), {"x0": x},
           {"c": np.zeros((3, 0), F32)})
    w.case("Tile", "edge_zero_repeat", [node("Tile", ["x", "r"], ["t"]), node("Shape", ["t"], ["y"])],
           {"x": x}, {"r": i64([0, 2])})
    w.case("Slice", "edge_empty_then_concat", [node("Slice", ["x", "s", "e", "a"], ["t"]),
                                               node("Concat", ["t", "x"], ["y"], axis=0)],
           {"x": x}, {"s": i64([2]), "e": i64([1]), "a": i64([0])})

    rng = w.rng("Pad/edge")
    w.case("Pad", "edge_reflect_max", node("Pad", ["x", "p"], ["y"], mode="reflect"), {"x": uni(rng, (3, 5))},
           {"p": i64([2, 4, 2, 4])})
    w.case("Pad", "edge_edge_negative", node("Pad", ["x", "p"], ["y"], mode="edge"), {"x": uni(rng, (4, 5))},
           {"p": i64([2, -1, -2, 3])}, optional=True)
    w.case("Pad", "edge_reflect_negative", node("Pad", ["x", "p"], ["y"], mode="reflect"), {"x": uni(rng, (4, 5))},
           {"p": i64([-1, 2, 1, -2])}, optional=True)

    rng = w.rng("Reshape/edge")
    w.case("Reshape", "op14_allowzero", node("Reshape", ["x", "shape"], ["y"], allowzero=1),
           {"x": uni(rng, (2, 3, 4))}, {"shape": i64([4, -1])}, opset=14)

    rng = w.rng("LayerNormalization/edge")
    w.case("LayerNormalization", "edge_bcast_scale", node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=1),
           {"x": uni(rng, (2, 3, 4))}, {"scale": uni(rng, (4,), 0.5, 2), "bias": uni(rng, (1, 4), -1, 1)},
           opset=17, optional=True)

    rng = w.rng("ArgMax/edge")
    w.case("ArgMax", "edge_dim1", node("ArgMax", ["x"], ["y"], axis=1, keepdims=0), {"x": uni(rng, (3, 1, 2))})

    rng = w.rng("Resize/edge")
    xr = uni(rng, (1, 2, 5, 6))

    def rs(tag, attrs, scales=None, sizes=None, data=xr, optional=False):
        names = ["x", ""] + (["scales"] if scales is not None else [""]) + (["sizes"] if sizes is not None else [])
        inits = {}
        if scales is not None:
            inits["scales"] = f32c(scales)
        if sizes is not None:
            inits["sizes"] = i64(sizes)
        w.case("Resize", tag, node("Resize", names, ["y"], **attrs), {"x": data}, inits, optional=optional)

    for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        rs(f"edge_nearest_{nm}_half_pixel_down", {"mode": "nearest", "nearest_mode": nm,
                                                  "coordinate_transformation_mode": "half_pixel"}, [1, 1, 0.625, 0.75])
    rs("edge_nearest_to_1x1", {"mode": "nearest"}, sizes=[1, 2, 1, 1])
    rs("edge_linear_to_1x1_half_pixel", {"mode": "linear"}, sizes=[1, 2, 1, 1])
    rs("edge_linear_to_1x1_align_corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
       sizes=[1, 2, 1, 1])
    rs("edge_cubic_half_pixel_down", {"mode": "cubic"}, [1, 1, 0.6, 0.7])
    rs("edge_cubic_asymmetric_up3", {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 3, 3])
    rs("edge_nearest_r3", {"mode": "nearest"}, [1, 2, 1.5], data=uni(rng, (2, 3, 4)))
    rs("edge_nearest_r5", {"mode": "nearest", "nearest_mode": "floor"}, [1, 1, 2, 1, 1.5],
       data=uni(rng, (1, 2, 2, 3, 2)))
    rs("edge_linear_r3", {"mode": "linear"}, [1, 1, 2.5], data=uni(rng, (2, 3, 4)), optional=True)
    rs("edge_linear_r2", {"mode": "linear"}, [1.5, 2], data=uni(rng, (3, 4)), optional=True)
    rs("edge_linear_r5_trilinear", {"mode": "linear"}, [1, 1, 2, 1.5, 2], data=uni(rng, (1, 2, 2, 3, 2)),
       optional=True)
    rs("edge_cubic_r2", {"mode": "cubic"}, [2, 1.5], data=uni(rng, (3, 4)), optional=True)

def gen_composed(w):
    """Operators korch composes from existing primitives (rule_*.cc): Einsum forms, scans, masks,
    one-hot gathers/scatters with run-time indices, losses, activations."""
    rng = w.rng("Einsum")
    for tag, eq, shapes in (
            ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
            ("batch_matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
            ("bcast_batch", "...ij,...jk->...ik", [(2, 1, 3, 4), (1, 3, 4, 2)]),
            ("implicit", "ij,jk", [(3, 4), (4, 2)]),
            ("outer", "i,j->ij", [(3,), (4,)]),
            ("transpose", "abc->cab", [(2, 3, 4)]),
            ("trace", "ii->", [(4, 4)]),
            ("diag", "ii->i", [(3, 3)]),
            ("sum_axes", "abc->b", [(2, 3, 4)]),
            ("attention_like", "bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
            ("free_sum", "ij,kl->ik", [(2, 3), (4, 5)]),
            ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
            ("bilinear", "bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)])):
        names = [f"x{i}" for i in range(len(shapes))]
        w.case("Einsum", tag, node("Einsum", names, ["y"], equation=eq),
               {n: uni(rng, sh) for n, sh in zip(names, shapes)}, opset=12)
    rng = w.rng("CumSum")
    for tag, x, axis, attrs in (
            ("f32_axis0", uni(rng, (5, 3)), 0, {}),
            ("f32_axis1_excl", uni(rng, (3, 7)), 1, {"exclusive": 1}),
            ("i64_rev", ints(rng, (4, 6)), -1, {"reverse": 1}),
            ("i32_excl_rev", ints(rng, (9,), dtype=np.int32), 0, {"exclusive": 1, "reverse": 1}),
            ("f64_r3", uni(rng, (2, 5, 3), dtype=np.float64), 1, {})):
        w.case("CumSum", tag, node("CumSum", ["x", "a"], ["y"], **attrs), {"x": x}, {"a": i64(axis)}, opset=14)
    rng = w.rng("Trilu")
    for tag, shape, k, upper in (("upper", (4, 5), None, 1), ("lower_k1", (2, 4, 3), 1, 0),
                                 ("upper_kneg", (5, 5), -2, 1), ("lower_kbig", (3, 4), 7, 0)):
        ins = ["x"] + (["k"] if k is not None else [])
        w.case("Trilu", tag, node("Trilu", ins, ["y"], upper=upper), {"x": uni(rng, shape)},
               {} if k is None else {"k": i64(k)}, opset=14)
    rng = w.rng("Hardmax")
    w.case("Hardmax", "op13_axis1", node("Hardmax", ["x"], ["y"], axis=1), {"x": small_ints_f(rng, (3, 4, 5))})
    w.case("Hardmax", "op11_coerced", node("Hardmax", ["x"], ["y"], axis=1), {"x": uni(rng, (2, 3, 4))}, opset=11)
    rng = w.rng("GatherND")
    data = uni(rng, (3, 4, 5))
    w.case("GatherND", "k2", node("GatherND", ["x", "i"], ["y"]), {"x": data, "i": i64([[0, 1], [2, -1], [1, 3]])},
           opset=12)
    w.case("GatherND", "batch1", node("GatherND", ["x", "i"], ["y"], batch_dims=1),
           {"x": data, "i": i64([[[1], [3]], [[0], [2]], [[3], [3]]])}, opset=12)
    rng = w.rng("GatherElements")
    w.case("GatherElements", "runtime_axis1", node("GatherElements", ["x", "i"], ["y"], axis=1),
           {"x": uni(rng, (3, 4)), "i": ints(rng, (3, 6), lo=-4, hi=3)})
    w.case("GatherElements", "runtime_axis0_small", node("GatherElements", ["x", "i"], ["y"], axis=0),
           {"x": uni(rng, (4, 5)), "i": ints(rng, (2, 3), lo=0, hi=3)})
    rng = w.rng("ScatterElements")
    for red in ("none", "add", "mul", "max", "min"):
        idx = np.stack([rng.permutation(5)[:3] for _ in range(2)]).astype(I64) - (2 if red == "none" else 0)
        if red != "none":
            idx[:, 2] = idx[:, 0]  # duplicates
        w.case("ScatterElements", f"axis1_{red}", node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction=red),
               {"x": uni(rng, (3, 5)), "i": idx, "u": uni(rng, (2, 3))}, opset=18)
    rng = w.rng("OneHot")
    w.case("OneHot", "axis_last", node("OneHot", ["i", "d", "v"], ["y"]), {"i": ints(rng, (2, 3), lo=-5, hi=5)},
           {"d": i64(5), "v": f32c([0.0, 2.0])}, opset=11)
    w.case("OneHot", "axis0", node("OneHot", ["i", "d", "v"], ["y"], axis=0), {"i": ints(rng, (4,), lo=0, hi=4)},
           {"d": np.array(4.0, F32), "v": f32c([-1.0, 1.0])}, opset=11)
    rng = w.rng("LRN")
    w.case("LRN", "size3", node("LRN", ["x"], ["y"], size=3), {"x": uni(rng, (2, 5, 3, 3))})
    w.case("LRN", "size5_attrs", node("LRN", ["x"], ["y"], size=5, alpha=0.01, beta=0.5, bias=2.0),
           {"x": uni(rng, (1, 6, 4, 3))})
    rng = w.rng("NegativeLogLikelihoodLoss")
    for red in ("none", "sum", "mean"):
        w.case("NegativeLogLikelihoodLoss", f"{red}_weight_ignore",
               node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], reduction=red, ignore_index=1),
               {"x": uni(rng, (3, 4, 2)), "t": ints(rng, (3, 2), lo=0, hi=3)}, {"w": uni(rng, (4,), lo=0.1, hi=1.0)})
    w.case("SoftmaxCrossEntropyLoss", "mean_logprob", node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "lp"]),
           {"x": uni(rng, (4, 5)), "t": ints(rng, (4,), lo=0, hi=4)})
    rng = w.rng("activations")
    x = uni(rng, (3, 4), lo=-3, hi=3)
    for op, attrs, opset in (("Shrink", {"lambd": 0.7, "bias": 0.2}, 13), ("Celu", {"alpha": 0.8}, 13),
                             ("ThresholdedRelu", {"alpha": 0.5}, 13), ("Tan", {}, 13), ("Sinh", {}, 13),
                             ("Cosh", {}, 13), ("Asinh", {}, 13), ("Atanh", {}, 13), ("IsNaN", {}, 13),
                             ("LpNormalization", {"axis": 0, "p": 1}, 13), ("Swish", {"alpha": 1.5}, 24)):
        xin = x / 4 if op == "Atanh" else x
        w.case(op, "basic", node(op, ["x"], ["y"], **attrs), {"x": xin}, opset=opset, op_optional=True)
    rng = w.rng("recurrent")
    seq, batch, inp, hid = 4, 2, 3, 5
    for op, gates, extra in (("RNN", 1, {}), ("GRU", 3, {}), ("GRU", 3, {"linear_before_reset": 1}),
                             ("LSTM", 4, {}), ("LSTM", 4, {"clip": 0.8})):
        for direction in ("forward", "reverse", "bidirectional"):
            dirs = 2 if direction == "bidirectional" else 1
            inits = {"W": uni(rng, (dirs, gates * hid, inp), -0.5, 0.5), "R": uni(rng, (dirs, gates * hid, hid), -0.5, 0.5),
                     "B": uni(rng, (dirs, 2 * gates * hid), -0.5, 0.5)}
            ins = {"X": uni(rng, (seq, batch, inp)), "h0": uni(rng, (dirs, batch, hid))}
            names = ["X", "W", "R", "B", "", "h0"]
            outs = ["Y", "Y_h"]
            if op == "LSTM":
                ins["c0"] = uni(rng, (dirs, batch, hid))
                inits["P"] = uni(rng, (dirs, 3 * hid), -0.5, 0.5)
                names += ["c0", "P"]
                outs.append("Y_c")
            tag = f"{direction}" + "".join(f"_{k}" for k in extra)
            w.case(op, tag, node(op, names, outs, hidden_size=hid, direction=direction, **extra), ins, inits, opset=14)
    rng = w.rng("quantize")
    x = uni(rng, (2, 3, 4), -3, 3)
    w.case("QuantizeLinear", "per_axis_i8", node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1), {"x": x},
           {"s": uni(rng, (3,), 0.01, 0.05), "z": np.array([-3, 0, 5], np.int8)})
    w.case("QuantizeLinear", "per_tensor_u8", node("QuantizeLinear", ["x", "s", "z"], ["y"]), {"x": x},
           {"s": np.array(0.02, F32), "z": np.array(128, np.uint8)})
    w.case("DequantizeLinear", "per_axis_u8", node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0),
           {"q": rng.integers(0, 256, (3, 5)).astype(np.uint8)},
           {"s": uni(rng, (3,), 0.01, 0.05), "z": np.array([0, 128, 7], np.uint8)})
    w.case("DynamicQuantizeLinear", "basic", node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"]), {"x": x}, opset=13)
    w.case("Acosh", "basic", node("Acosh", ["x"], ["y"]), {"x": uni(rng, (3, 4), lo=1.0, hi=4.0)})
    w.case("RMSNormalization", "axis1", node("RMSNormalization", ["x", "s"], ["y"], axis=1),
           {"x": uni(rng, (2, 3, 4))}, {"s": uni(rng, (3, 4))}, opset=23, op_optional=True)



GENERATORS = (gen_unary, gen_binary, gen_conv, gen_pool, gen_random_windows, gen_linear, gen_norm, gen_reduce, gen_layout,
              gen_resize, gen_misc, gen_edges, gen_composed)

REQUIRED_OPS = """Abs Add And ArgMax AveragePool BatchNormalization Cast Ceil Clip Concat Constant ConstantOfShape
Conv ConvTranspose Cos DepthToSpace Div Dropout Elu Equal Erf Exp Expand Flatten Floor Gather Gemm
GlobalAveragePool GlobalMaxPool Greater HardSigmoid HardSwish Identity InstanceNormalization LayerNormalization
LeakyRelu Less Log LogSoftmax MatMul Max MaxPool Mean Min Mod Mul Neg Not Pad Pow PRelu Range Reciprocal ReduceL2
ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize Selu Shape Sigmoid Sign Sin
Slice Softmax Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Tanh Tile Transpose Unsqueeze Upsample
Where""".split()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", help="folder to write <Op>_<variant>/ case folders into")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)
    ort.set_default_logger_severity(4)
    w = CaseWriter(args.outdir, args.seed)
    for gen in GENERATORS:
        gen(w)
    for line in w.notes + w.errors:
        print(line)
    missing = [op for op in REQUIRED_OPS if w.counts.get(op, 0) == 0]
    for op in missing:
        print(f"error: no case written for required op {op}")
    total = sum(w.counts.values())
    per_op = " ".join(f"{op}={n}" for op, n in sorted(w.counts.items()) if n)
    print(f"wrote {total} cases for {sum(1 for n in w.counts.values() if n)} ops to {args.outdir} "
          f"(onnxruntime {ort.__version__}, onnx {onnx.__version__}, seed {args.seed}): {per_op}")
    return 1 if (w.errors or missing) else 0


if __name__ == "__main__":
    sys.exit(main())
