#!/usr/bin/env python3
"""Writes the minimised fuzz_import reproducers (one .onnx per finding) into this folder.

Each model is hand-minimised from a libFuzzer artifact. Every one of them must make
`korch::import_onnx_model` (and then `reference::run_graph` on zero inputs) either succeed or
throw korch::Error -- see README.md for what each one triggered and the proposed fix.
Needs the `onnx` Python package.
"""
import os
import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="fuzz")
    m.ir_version = 8
    return m


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


F, I64 = TensorProto.FLOAT, TensorProto.INT64
cases = {}

# F1: empty initializer stored as raw_data="" -> memcpy(nullptr, p, 0) (UBSan nonnull).
t = TensorProto(name="axes", data_type=I64, dims=[0], raw_data=b"")
cases["f01_empty_raw_data_memcpy_null"] = model(
    [helper.make_node("Identity", ["axes"], ["y"])], [], [vi("y", I64, [0])], [t])

# F2: Resize scale so large that floor(dim * scale) does not fit int64 (float-cast-overflow).
cases["f02_resize_scale_float_cast_overflow"] = model(
    [helper.make_node("Resize", ["X", "", "scales"], ["Y"], mode="nearest")],
    [vi("X", F, [1, 1, 2, 2])], [vi("Y", F, None)],
    [init("scales", np.array([1, 1, 1, 1e30], np.float32))])

# F3: Reshape target whose known dimensions overflow int64 when multiplied.
cases["f03_reshape_target_product_overflow"] = model(
    [helper.make_node("Reshape", ["X", "shape"], ["Y"])],
    [vi("X", F, [2, 3])], [vi("Y", F, None)],
    [init("shape", np.array([17179869190, 17179869188, -1], np.int64))])

# F4: Split of a rank-0 tensor: normalize_axis(0, 0) == 0, then shape()[0] reads past the end.
cases["f04_split_scalar_out_of_bounds"] = model(
    [helper.make_node("Split", ["X"], ["a", "b"])],
    [vi("X", F, [])], [vi("a", F, None), vi("b", F, None)])

# F4b: same bug class in Squeeze(axes=[0]) of a scalar.
cases["f04b_squeeze_scalar_out_of_bounds"] = model(
    [helper.make_node("Squeeze", ["X", "axes"], ["Y"])],
    [vi("X", F, [])], [vi("Y", F, None)], [init("axes", np.array([0], np.int64))])

# F5: Split with no outputs -> num_outputs defaults to 0 -> integer division by zero.
cases["f05_split_zero_outputs_div_by_zero"] = model(
    [helper.make_node("Split", ["X"], [])],
    [vi("X", F, [2])], [vi("X2", F, None)])
cases["f05_split_zero_outputs_div_by_zero"].graph.output[0].name = "X"

# F6: Pad of a constant with huge (but non-overflowing) pads: import-time constant folding
# allocates ~10 GB (ASan: allocator out of memory; plain build: std::bad_alloc).
cases["f06_pad_constant_fold_giant"] = model(
    [helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge")],
    [], [vi("y", TensorProto.INT32, None)],
    [init("x", np.ones([1, 3, 4, 5], np.int32)), init("pads", np.array([0, 0, 0, 0, 0, 0, 1, 838860801], np.int64))])

# F7: initializer declaring 20 G elements with no payload: tensor_from_proto allocates the
# tensor before checking that raw_data / *_data hold that many values.
t = TensorProto(name="w", data_type=TensorProto.UINT8, dims=[1, 16379, 103, 1, 12415])
cases["f07_initializer_alloc_before_size_check"] = model(
    [helper.make_node("Identity", ["w"], ["y"])], [], [vi("y", TensorProto.UINT8, None)], [t])

# F8: Resize of a tensor with an empty axis to a non-empty size: the reference reads cur[-1].
cases["f08_resize_empty_axis_oob_read"] = model(
    [helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode="nearest")],
    [vi("X", F, [1, 0, 2, 4])], [vi("Y", F, None)],
    [init("sizes", np.array([1, 1, 2, 4], np.int64))])

# F9: Resize whose output is empty but whose intermediate (axis-by-axis) result is 2.5 GB.
cases["f09_resize_intermediate_blowup_oom"] = model(
    [helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode="nearest")],
    [vi("X", F, [1, 1, 99, 4])], [vi("Y", F, None)],
    [init("sizes", np.array([182, 4353, 0, 0], np.int64))])

# F10: Resize to an empty output with one huge axis: the reference loops 4e9 times (timeout).
cases["f10_resize_empty_output_huge_axis_timeout"] = model(
    [helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode="nearest")],
    [vi("X", F, [1, 1, 2, 4])], [vi("Y", F, None)],
    [init("sizes", np.array([1, 0, 4294967353, 3], np.int64))])

# F11: Resize with negative sizes: import accepts a graph with a negative dimension.
cases["f11_resize_negative_sizes_accepted"] = model(
    [helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode="nearest")],
    [vi("X", F, [1, 1, 2, 2])], [vi("Y", F, None)],
    [init("sizes", np.array([1, 1, -2, 2], np.int64))])

# F12: Pad whose pads overflow int64 in shape inference (x[i] + pads[i] + pads[rank+i]).
cases["f12_pad_pads_add_overflow"] = model(
    [helper.make_node("Pad", ["x", "pads"], ["y"], mode="constant")],
    [vi("x", F, [1, 3, 4, 5])], [vi("y", F, None)],
    [init("pads", np.array([0, 0, 0, 8101528228407017475, 0, 0, 0, 8030555852345704452], np.int64))])

# F13: 400-byte model whose import-time constant folding builds a 39M-element reflect Pad
# (>10 s under ASan: a timeout; ~160 MB of constants).
cases["f13_pad_constant_fold_slow"] = model(
    [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
    [], [vi("y", TensorProto.INT32, None)],
    [init("x", np.ones([1, 3, 4, 5], np.int32)), init("pads", np.array([0, 0, 1, 1, 0, 0, 1, 2621441], np.int64))])

# F14: Tile whose repeats overflow the output dimension (repeats[i] * s[i]).
cases["f14_tile_repeats_mul_overflow"] = model(
    [helper.make_node("Tile", ["x", "r"], ["z"])],
    [vi("x", F, [2, 3, 4, 5])], [vi("z", F, None)],
    [init("r", np.array([7, 6, 6917530277476564996, 1], np.int64))])

# F15: MaxPool (uint8) with pads >= kernel: an all-padding window yields -inf, converted to
# uint8 in TensorData::set_f64 (float-cast-overflow UB).
cases["f15_maxpool_u8_all_padding_window"] = model(
    [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[5, 5], pads=[18, 2, 2, 2])],
    [vi("x", TensorProto.UINT8, [1, 1, 10, 5])], [vi("y", TensorProto.UINT8, None)], opset=12)

# F15b: same root cause through Cast: float 1e10 -> int32 at import-time folding.
cases["f15b_cast_float_to_int_out_of_range"] = model(
    [helper.make_node("Cast", ["c"], ["y"], to=TensorProto.INT32)],
    [], [vi("y", TensorProto.INT32, None)], [init("c", np.array([1e10, -np.inf, np.nan], np.float32))])

# F15c: same root cause through get_i64: a double "sizes" tensor holding NaN is read with
# constant_ints (float-cast-overflow UB; constant_ints also accepts float tensors silently).
cases["f15c_resize_double_sizes_nan"] = model(
    [helper.make_node("Resize", ["X", "", "", "sizes"], ["Y"], mode="nearest")],
    [vi("X", F, [1, 1, 91, 4])], [vi("Y", F, None)],
    [init("sizes", np.array([1, np.nan, 1, 1], np.float64))])

# F16: integer Div INT64_MIN / -1 folded at import: SIGFPE (the quotient overflows).
cases["f16_int_div_min_by_minus_one_sigfpe"] = model(
    [helper.make_node("Div", ["a", "b"], ["y"])], [], [vi("y", I64, None)],
    [init("a", np.array([np.iinfo(np.int64).min], np.int64)), init("b", np.array([-1], np.int64))])

# F17: integer Add overflow during folding (signed-integer-overflow UB).
cases["f17_int_add_overflow"] = model(
    [helper.make_node("Add", ["a", "b"], ["y"])], [], [vi("y", I64, None)],
    [init("a", np.array([np.iinfo(np.int64).max], np.int64)), init("b", np.array([1], np.int64))])

# F18 (found by review, confirmed with fuzz_import): a graph input whose static shape
# overflows int64 -- num_elements() overflows (dtype.cc) as soon as a rule asks for it.
cases["f18_input_shape_num_elements_overflow"] = model(
    [helper.make_node("Reshape", ["X", "shape"], ["Y"])],
    [vi("X", F, [1 << 40, 1 << 40])], [vi("Y", F, None)], [init("shape", np.array([-1], np.int64))])

if __name__ == "__main__":
    for name, m in cases.items():
        with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
            f.write(m.SerializeToString())
        print(name)
