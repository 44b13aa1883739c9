#!/usr/bin/env bash
# Builds the seed corpus for fuzz_import (not committed; see fuzz/.gitignore).
#
#   fuzz/make_seeds.sh [CORPUS_DIR]        (default: fuzz/corpus)
#
# Sources (whatever exists is used):
#   $ONNX_NODE_CASES (default build/cases/onnx/node)/<case>/model.onnx  -- ONNX node tests
#   $KORCH_MODELS    (default build/cases/models)/{tiny_cnn,tiny_vit}/model.onnx (the test suite's exports)
# If python3 with the `onnx` package is available, a few node tests whose shape/axes/pads
# inputs are graph inputs are also rewritten with those inputs bound as initializers (from
# test_data_set_0), so that Reshape/Slice/Pad/Resize/... seeds actually import.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/corpus}"
cases="${ONNX_NODE_CASES:-$here/../build/cases/onnx/node}"
models="${KORCH_MODELS:-$here/../build/cases/models}"
mkdir -p "$out"

# ~40 small, diverse node tests that korch imports as-is.
plain=(
  test_abs test_add_bcast test_add_uint8 test_and_bcast4v3d test_argmax_keepdims_random_select_last_index
  test_argmin_negative_axis_keepdims_example test_averagepool_2d_pads_count_include_pad
  test_averagepool_2d_same_lower test_averagepool_3d_default test_basic_conv_with_padding
  test_batchnorm_epsilon test_cast_FLOAT_to_DOUBLE test_clip_default_int8_min test_clip_splitbounds
  test_concat_3d_axis_negative_2 test_constant test_conv_with_strides_and_asymmetric_padding
  test_convtranspose_output_shape test_convtranspose_dilations test_depthtospace_crd_mode_example
  test_div_uint8 test_dropout_default_mask test_flatten_negative_axis2 test_gather_negative_indices
  test_gemm_all_attributes test_globalmaxpool_precomputed test_hardswish_expanded test_instancenorm_epsilon
  test_layer_normalization_3d_axis_negative_2_epsilon test_logsoftmax_axis_1_expanded test_matmul_4d
  test_maxpool_2d_dilations test_maxpool_2d_ceil test_maxpool_2d_uint8 test_mod_mixed_sign_int8
  test_mvn_expanded test_pow_types_int64_float32 test_prelu_broadcast test_reduce_log_sum_exp_keepdims_random
  test_reduce_prod_do_not_keepdims_example test_reduce_l2_negative_axes_keep_dims_random
  test_shape_start_1_end_negative_1 test_size_example test_softmax_large_number_expanded
  test_spacetodepth_example test_split_equal_parts_2d test_transpose_all_permutations_4
  test_where_long_example test_xor_bcast4v2d test_sum_two_inputs
)
# Node tests whose integer inputs (shape, axes, pads, sizes...) get bound as initializers
# (every input after the first; NAME:all binds the first one too).
bound=(
  test_reshape_negative_extended_dims test_reshape_zero_and_negative_dim test_slice_neg_steps
  test_slice_end_out_of_bounds test_expand_dim_changed test_unsqueeze_unsorted_axes
  test_squeeze_negative_axes test_constant_pad test_tile test_resize_upsample_scales_linear
  test_resize_downsample_sizes_nearest test_resize_upsample_scales_cubic_align_corners
  test_split_variable_parts_2d test_range_int32_type_negative_delta test_constantofshape_int_zeros
  test_reflect_pad test_edge_pad test_scatternd:all test_reduce_sum_negative_axes_keepdims_random test_upsample_nearest
)

n=0
for c in "${plain[@]}"; do
  if [[ -f "$cases/$c/model.onnx" ]]; then cp "$cases/$c/model.onnx" "$out/$c.onnx"; n=$((n + 1)); fi
done
for m in tiny_cnn tiny_vit; do
  if [[ -f "$models/$m/model.onnx" ]]; then cp "$models/$m/model.onnx" "$out/$m.onnx"; n=$((n + 1)); fi
done

if python3 -c 'import onnx, onnx.numpy_helper' 2>/dev/null; then
  dirs=()
  for c in "${bound[@]}"; do [[ -d "$cases/${c%:all}" ]] && dirs+=("$cases/$c"); done
  if ((${#dirs[@]})); then
    n=$((n + $(python3 - "$out" "${dirs[@]}" <<'PY'
import os, sys, onnx
from onnx import numpy_helper
out, dirs = sys.argv[1], sys.argv[2:]
written = 0
for d in dirs:
    bind_all = d.endswith(":all")  # also bind the data input (ops that need it constant)
    d = d[:-4] if bind_all else d
    m = onnx.load(os.path.join(d, "model.onnx"))
    g = m.graph
    data = os.path.join(d, "test_data_set_0")
    bind = []
    for i, vi in enumerate(list(g.input)):
        if vi.type.tensor_type.elem_type not in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and i == 0 and not bind_all:
            continue  # keep the data input a graph input
        pb = os.path.join(data, "input_%d.pb" % i)
        if not os.path.exists(pb):
            continue
        t = onnx.TensorProto()
        with open(pb, "rb") as f:
            t.ParseFromString(f.read())
        t.name = vi.name
        bind.append((vi, t))
    for vi, t in bind:
        g.input.remove(vi)
        g.initializer.append(t)
    with open(os.path.join(out, os.path.basename(d) + "_bound.onnx"), "wb") as f:
        f.write(m.SerializeToString())
    written += 1
print(written)
PY
)))
  fi
else
  echo "make_seeds.sh: python3 'onnx' not found; skipping the bound-input seeds" >&2
fi
echo "make_seeds.sh: $n seeds in $out"
