// Fission rules for data-movement ONNX operators. Each becomes Transpose, Reshape, Slice,
// Concat, Pad, Gather, Broadcast or Resize primitives with fully static attributes; Tile,
// DepthToSpace and SpaceToDepth are spelled as Reshape/Broadcast/Transpose chains, wrap-mode Pad as
// one Gather per padded axis.
#include <algorithm>
#include <cmath>
#include <limits>

#include "fission/fission.h"

namespace korch {

namespace {

std::vector<int64_t> axes_from(FissionContext& c, int input_index, const char* attr_name) {
  if (c.has_input(input_index)) return c.constant_ints(input_index);
  return c.attr_ints(attr_name);
}

TensorId slice(FissionContext& c, TensorId x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
               const std::vector<int64_t>& axes_in, const std::vector<int64_t>& steps_in) {
  const Shape& s = c.shape(x);
  int64_t rank = c.rank(x);
  std::vector<int64_t> axes = axes_in;
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (starts.size() != ends.size() || starts.size() != axes.size() ||
      (!steps_in.empty() && steps_in.size() != axes.size()))
    c.error("starts, ends, axes and steps have different lengths");
  std::vector<int64_t> st(rank, 0), stp(rank, 1), sizes = s;
  std::vector<char> seen(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normalize_axis(axes[i], rank);
    if (seen[a]) c.error("axis ", axes[i], " appears twice");
    seen[a] = 1;
    int64_t dim = s[a];
    int64_t step = steps_in.empty() ? 1 : steps_in[i];
    if (step == 0) c.error("slice step cannot be 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start = start < -dim ? -1 : start + dim;
    if (end < 0) end = end < -dim ? -1 : end + dim;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, -1, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    int64_t size = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
    if (size < 0) size = 0;
    sizes[a] = size;
    st[a] = size > 0 ? start : 0;
    stp[a] = step;
  }
  return c.emit(PrimOp::Slice, {x}, Attrs().set("starts", st).set("steps", stp).set("sizes", sizes));
}

TensorId transpose(FissionContext& c, TensorId x, const std::vector<int64_t>& perm) {
  return c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", perm));
}

TensorId broadcast_to(FissionContext& c, TensorId x, const Shape& shape) {
  if (c.shape(x) == shape) return x;
  return c.emit(PrimOp::Broadcast, {x}, Attrs().set("shape", shape));
}

void resize_common(FissionContext& c, TensorId x, std::vector<double> scales, std::vector<int64_t> sizes,
                   std::vector<double> roi, std::string mode, std::string coord_mode, std::string nearest_mode) {
  const Shape& s = c.shape(x);
  int64_t rank = c.rank(x);
  if (!sizes.empty()) {
    if (static_cast<int64_t>(sizes.size()) != rank) c.error("sizes must have one entry per dimension");
    bool given = static_cast<int64_t>(scales.size()) == rank;  // keep_aspect_ratio_policy's scales
    scales.resize(rank);
    for (int64_t i = 0; i < rank; ++i) {
      if (sizes[i] < 0) c.error("sizes must be non-negative");
      if (s[i] == 0 && sizes[i] != 0) c.error("cannot resize an empty axis to size ", sizes[i]);
      if (!given) scales[i] = s[i] == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(s[i]);
    }
  } else {
    if (static_cast<int64_t>(scales.size()) != rank)
      c.error("scales must have one entry per dimension (got ", scales.size(), ")");
    sizes.resize(rank);
    for (int64_t i = 0; i < rank; ++i) {
      if (!(scales[i] > 0) || !std::isfinite(scales[i])) c.error("scales must be positive and finite");
      double size = std::floor(static_cast<double>(s[i]) * scales[i]);
      if (size >= 0x1p62) c.error("scale ", scales[i], " gives an impossibly large output");
      sizes[i] = static_cast<int64_t>(size);
    }
  }
  if (roi.empty()) {
    roi.assign(2 * rank, 0.0);
    for (int64_t i = 0; i < rank; ++i) roi[rank + i] = 1.0;
  }
  if (static_cast<int64_t>(roi.size()) != 2 * rank) c.error("roi must have 2 x rank entries");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") c.error("unsupported mode '", mode, "'");
  c.set_output(0, c.emit(PrimOp::Resize, {x},
                         Attrs()
                             .set("sizes", sizes)
                             .set("scales", scales)
                             .set("roi", roi)
                             .set("mode", mode)
                             .set("coord_mode", coord_mode)
                             .set("nearest_mode", nearest_mode)
                             .set("cubic_coeff_a", c.attr_f("cubic_coeff_a", -0.75))
                             .set("exclude_outside", c.attr_i("exclude_outside", 0))
                             .set("extrapolation_value", c.attr_f("extrapolation_value", 0.0))));
}

// DepthToSpace / SpaceToDepth as reshape -> transpose -> reshape.
void depth_space_rule(const std::string& op_type, bool to_space) {
  register_fission_rule(op_type, [to_space](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) != 4) c.error("expects a 4-D NCHW tensor");
    int64_t b = c.attr_i("blocksize", 0);
    if (b <= 0) c.error("blocksize must be positive");
    const Shape s = c.shape(x);
    int64_t n = s[0], ch = s[1], h = s[2], w = s[3];
    if (to_space) {
      if (ch % (b * b)) c.error("channels ", ch, " not divisible by blocksize^2");
      bool crd = c.attr_s("mode", "DCR") == "CRD";
      TensorId r = crd ? c.reshape(x, {n, ch / (b * b), b, b, h, w}) : c.reshape(x, {n, b, b, ch / (b * b), h, w});
      TensorId t =
          transpose(c, r, crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2});
      c.set_output(0, c.reshape(t, {n, ch / (b * b), h * b, w * b}));
    } else {
      if (h % b || w % b) c.error("spatial size not divisible by blocksize");
      // SpaceToDepth-28's mode: DCR (the default) puts the block offsets before the channels.
      std::string mode = c.attr_s("mode", "DCR");
      if (mode != "DCR" && mode != "CRD") c.error("unknown mode '", mode, "'");
      TensorId r = c.reshape(x, {n, ch, h / b, b, w / b, b});
      TensorId t = transpose(
          c, r, mode == "CRD" ? std::vector<int64_t>{0, 1, 3, 5, 2, 4} : std::vector<int64_t>{0, 3, 5, 1, 2, 4});
      c.set_output(0, c.reshape(t, {n, ch * b * b, h / b, w / b}));
    }
  });
}

}  // namespace

void register_layout_rules() {
  register_fission_rule("Transpose", [](FissionContext& c) {
    TensorId x = c.input(0);
    std::vector<int64_t> perm = c.attr_ints("perm");
    if (perm.empty())
      for (int64_t i = c.rank(x) - 1; i >= 0; --i) perm.push_back(i);
    if (static_cast<int64_t>(perm.size()) != c.rank(x))
      c.error("perm has ", perm.size(), " entries for rank ", c.rank(x));
    for (int64_t& p : perm) p = normalize_axis(p, c.rank(x));
    c.set_output(0, transpose(c, x, perm));
  });
  register_fission_rule("Reshape", [](FissionContext& c) {
    TensorId x = c.input(0);
    std::vector<int64_t> target = c.opset() < 5 ? c.attr_ints("shape") : c.constant_ints(1);
    bool allowzero = c.attr_i("allowzero", 0) != 0;
    const Shape& s = c.shape(x);
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0 && !allowzero) {
        if (i >= s.size()) c.error("shape entry 0 at position ", i, " has no input dimension to copy");
        target[i] = s[i];
      }
      if (target[i] == -1) {
        if (infer >= 0) c.error("more than one -1 in the target shape");
        infer = static_cast<int64_t>(i);
      } else if (target[i] < 0) {
        c.error("invalid target dimension ", target[i]);
      } else if (__builtin_mul_overflow(known, target[i], &known)) {
        c.error("target shape ", shape_str(target), " is too large");
      }
    }
    if (infer >= 0) {
      if (known == 0 || num_elements(s) % known) c.error("cannot infer -1 when reshaping ", shape_str(s));
      target[infer] = num_elements(s) / known;
    }
    if (num_elements(target) != num_elements(s)) c.error("cannot reshape ", shape_str(s), " to ", shape_str(target));
    c.set_output(0, c.reshape(x, target));
  });
  register_fission_rule("Flatten", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t rank = c.rank(x);
    int64_t axis = c.attr_i("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) c.error("axis out of range");
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= c.shape(x)[i];
    c.set_output(0, c.reshape(x, {outer, num_elements(c.shape(x)) / std::max<int64_t>(outer, 1)}));
  });
  register_fission_rule("Squeeze", [](FissionContext& c) {
    TensorId x = c.input(0);
    std::vector<int64_t> axes = axes_from(c, 1, "axes");
    const Shape& s = c.shape(x);
    std::vector<char> drop(s.size(), 0);
    if (axes.empty()) {
      for (size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
    } else {
      for (int64_t a : axes) {
        int64_t n = normalize_axis(a, c.rank(x));
        if (n >= c.rank(x)) c.error("cannot squeeze axis ", a, " of a scalar");
        if (s[n] != 1) c.error("cannot squeeze axis ", a, " of size ", s[n]);
        drop[n] = 1;
      }
    }
    Shape out;
    for (size_t i = 0; i < s.size(); ++i)
      if (!drop[i]) out.push_back(s[i]);
    c.set_output(0, c.reshape(x, out));
  });
  register_fission_rule("Unsqueeze", [](FissionContext& c) {
    TensorId x = c.input(0);
    std::vector<int64_t> axes = axes_from(c, 1, "axes");
    int64_t out_rank = c.rank(x) + static_cast<int64_t>(axes.size());
    std::vector<char> inserted(out_rank, 0);
    for (int64_t a : axes) {
      int64_t n = normalize_axis(a, out_rank);
      if (inserted[n]) c.error("axis ", a, " appears twice");
      inserted[n] = 1;
    }
    Shape out;
    size_t k = 0;
    for (int64_t i = 0; i < out_rank; ++i) out.push_back(inserted[i] ? 1 : c.shape(x)[k++]);
    c.set_output(0, c.reshape(x, out));
  });
  register_fission_rule("Slice", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.opset() < 10) {
      c.set_output(0, slice(c, x, c.attr_ints("starts"), c.attr_ints("ends"), c.attr_ints("axes"), {}));
      return;
    }
    std::vector<int64_t> axes = c.has_input(3) ? c.constant_ints(3) : std::vector<int64_t>{};
    std::vector<int64_t> steps = c.has_input(4) ? c.constant_ints(4) : std::vector<int64_t>{};
    c.set_output(0, slice(c, x, c.constant_ints(1), c.constant_ints(2), axes, steps));
  });
  register_fission_rule("Concat", [](FissionContext& c) {
    std::vector<TensorId> ins;
    for (int i = 0; i < c.num_inputs(); ++i) ins.push_back(c.input(i));
    int64_t axis = normalize_axis(c.attr_i("axis", 0), c.rank(ins[0]));
    if (ins.size() == 1) {
      c.set_output(0, c.unary(PrimOp::Copy, ins[0]));
      return;
    }
    c.set_output(0, c.emit(PrimOp::Concat, ins, Attrs().set("axis", axis)));
  });
  register_fission_rule("Split", [](FissionContext& c) {
    TensorId x = c.input(0);
    if (c.rank(x) == 0) c.error("cannot split a scalar");
    int64_t axis = normalize_axis(c.attr_i("axis", 0), c.rank(x));
    int64_t dim = c.shape(x)[axis];
    std::vector<int64_t> split = c.has_input(1) ? c.constant_ints(1) : c.attr_ints("split");
    int n = c.num_outputs();
    if (split.empty()) {
      int64_t parts = c.attr_i("num_outputs", n);
      if (parts <= 0) c.error("Split needs at least one output");
      int64_t chunk = (dim + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i) split.push_back(std::min(chunk, dim - i * chunk));
    }
    if (static_cast<int>(split.size()) != n) c.error("split has ", split.size(), " parts for ", n, " outputs");
    int64_t total = 0;
    for (int64_t v : split) total += v;
    if (total != dim) c.error("split sizes sum to ", total, ", axis has ", dim);
    int64_t start = 0;
    for (int i = 0; i < n; ++i) {
      c.set_output(i, slice(c, x, {start}, {start + split[i]}, {axis}, {}));
      start += split[i];
    }
  });
  register_fission_rule("Pad", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t rank = c.rank(x);
    std::string mode = c.attr_s("mode", "constant");
    std::vector<int64_t> pads;
    double value = 0;
    if (c.opset() < 11) {
      pads = c.attr_ints("pads");
      value = c.attr_f("value", 0.0);
    } else {
      pads = c.constant_ints(1);
      if (c.has_input(2)) value = c.constant_input(2).get_f64(0);
      if (c.has_input(3)) {
        std::vector<int64_t> axes = c.constant_ints(3);
        if (pads.size() != 2 * axes.size()) c.error("pads must have 2 x len(axes) entries");
        std::vector<int64_t> full(2 * rank, 0);
        for (size_t i = 0; i < axes.size(); ++i) {
          int64_t a = normalize_axis(axes[i], rank);
          full[a] = pads[i];
          full[rank + a] = pads[axes.size() + i];
        }
        pads = full;
      }
    }
    if (static_cast<int64_t>(pads.size()) != 2 * rank) c.error("pads has ", pads.size(), " entries for rank ", rank);
    if (mode == "wrap") {
      // Output index i along an axis reads input index (i - pad_begin) mod size: one Gather per
      // padded axis.
      TensorId y = x;
      for (int64_t axis = 0; axis < rank; ++axis) {
        int64_t size = c.shape(x)[axis], begin = pads[axis], out = size + begin + pads[rank + axis];
        if (begin == 0 && out == size) continue;
        if (size == 0 || out < 0) c.error("cannot wrap-pad an axis of size ", size, " to ", out);
        std::vector<int64_t> source(out);
        for (int64_t i = 0; i < out; ++i) source[i] = ((i - begin) % size + size) % size;
        y = c.emit(PrimOp::Gather, {y, c.constant(TensorData::from_i64(DType::I64, {out}, source))},
                   Attrs().set("axis", axis));
      }
      c.set_output(0, y == x ? c.unary(PrimOp::Copy, x) : y);
      return;
    }
    c.set_output(0, c.emit(PrimOp::Pad, {x}, Attrs().set("pads", pads).set("mode", mode).set("value", value)));
  });
  register_fission_rule("Gather", [](FissionContext& c) {
    TensorId x = c.input(0);
    int64_t axis = normalize_axis(c.attr_i("axis", 0), c.rank(x));
    c.set_output(0, c.emit(PrimOp::Gather, {x, c.input(1)}, Attrs().set("axis", axis)));
  });
  register_fission_rule("Expand", [](FissionContext& c) {
    TensorId x = c.input(0);
    Shape target = broadcast_shapes(c.shape(x), c.constant_ints(1));
    TensorId y = broadcast_to(c, x, target);
    c.set_output(0, y == x ? c.unary(PrimOp::Copy, x) : y);
  });
  register_fission_rule("Tile", [](FissionContext& c) {
    TensorId x = c.input(0);
    std::vector<int64_t> repeats = c.constant_ints(1);
    const Shape s = c.shape(x);
    if (repeats.size() != s.size()) c.error("repeats has ", repeats.size(), " entries for rank ", s.size());
    Shape interleaved_one, interleaved, out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (repeats[i] < 0) c.error("negative repeat");
      interleaved_one.insert(interleaved_one.end(), {1, s[i]});
      interleaved.insert(interleaved.end(), {repeats[i], s[i]});
      int64_t n;
      if (__builtin_mul_overflow(repeats[i], s[i], &n)) c.error("repeats ", repeats[i], " overflow dimension ", i);
      out.push_back(n);
    }
    TensorId y = c.reshape(broadcast_to(c, c.reshape(x, interleaved_one), interleaved), out);
    c.set_output(0, y == x ? c.unary(PrimOp::Copy, x) : y);
  });
  depth_space_rule("DepthToSpace", true);
  depth_space_rule("SpaceToDepth", false);
  register_fission_rule("Resize", [](FissionContext& c) {
    TensorId x = c.input(0);
    std::vector<double> scales, roi;
    std::vector<int64_t> sizes;
    std::string default_coord = "half_pixel";
    if (c.opset() < 11) {
      scales = c.constant_floats(1);
      default_coord = "asymmetric";
    } else {
      if (c.has_input(1) && num_elements(c.shape(c.input(1))) > 0) roi = c.constant_floats(1);
      if (c.has_input(2) && num_elements(c.shape(c.input(2))) > 0) scales = c.constant_floats(2);
      if (c.has_input(3) && num_elements(c.shape(c.input(3))) > 0) sizes = c.constant_ints(3);
      if (scales.empty() && sizes.empty()) c.error("needs either scales or sizes");
    }
    if (c.attr_i("antialias", 0)) c.error("antialias is not supported");
    const Shape& in = c.shape(x);
    int64_t rank = c.rank(x);
    if (c.has_attr("axes")) {  // opset 18: scales / sizes / roi name only these axes
      std::vector<int64_t> axes = c.attr_ints("axes");
      for (int64_t& a : axes) a = normalize_axis(a, rank);
      int64_t n = static_cast<int64_t>(axes.size());
      if ((!scales.empty() && static_cast<int64_t>(scales.size()) != n) ||
          (!sizes.empty() && static_cast<int64_t>(sizes.size()) != n) ||
          (!roi.empty() && static_cast<int64_t>(roi.size()) != 2 * n))
        c.error("scales, sizes and roi must have one entry (roi: two) per axis in 'axes'");
      std::vector<double> full_scales(rank, 1.0), full_roi(2 * rank, 0.0);
      std::vector<int64_t> full_sizes = in;
      for (int64_t i = 0; i < rank; ++i) full_roi[rank + i] = 1.0;
      for (int64_t i = 0; i < n; ++i) {
        if (!scales.empty()) full_scales[axes[i]] = scales[i];
        if (!sizes.empty()) full_sizes[axes[i]] = sizes[i];
        if (!roi.empty()) {
          full_roi[axes[i]] = roi[i];
          full_roi[rank + axes[i]] = roi[n + i];
        }
      }
      scales = scales.empty() ? scales : full_scales;
      sizes = sizes.empty() ? sizes : full_sizes;
      roi = roi.empty() ? roi : full_roi;
      if (!sizes.empty()) {
        std::vector<char> in_axes(rank, 0);
        for (int64_t a : axes) in_axes[a] = 1;
        for (int64_t i = 0; i < rank; ++i)
          if (!in_axes[i]) sizes[i] = in[i];
      }
    }
    std::string policy = c.attr_s("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && !sizes.empty()) {
      // One scale for the resized axes (those whose size is given), sizes rounded half up.
      std::vector<int64_t> axes;
      if (c.has_attr("axes")) {
        axes = c.attr_ints("axes");
        for (int64_t& a : axes) a = normalize_axis(a, rank);
      } else {
        for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
      }
      if (policy != "not_larger" && policy != "not_smaller") c.error("unknown keep_aspect_ratio_policy '", policy, "'");
      double scale = policy == "not_larger" ? 1e300 : -1e300;
      for (int64_t a : axes) {
        if (in[a] == 0) c.error("cannot keep the aspect ratio of an empty axis");
        double r = static_cast<double>(sizes[a]) / static_cast<double>(in[a]);
        scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
      }
      scales.assign(rank, 1.0);
      for (int64_t a : axes) {
        scales[a] = scale;
        sizes[a] = static_cast<int64_t>(scale * static_cast<double>(in[a]) + 0.5);
      }
    }
    std::string coord = c.opset() < 11 ? "asymmetric" : c.attr_s("coordinate_transformation_mode", default_coord);
    resize_common(c, x, scales, sizes, roi, c.attr_s("mode", "nearest"), coord,
                  c.attr_s("nearest_mode", c.opset() < 11 ? "floor" : "round_prefer_floor"));
  });
  register_fission_rule("Upsample", [](FissionContext& c) {
    TensorId x = c.input(0);
    std::vector<double> scales = c.opset() < 9 ? c.attr_floats("scales") : c.constant_floats(1);
    std::string mode = c.attr_s("mode", "nearest");
    if (mode == "bilinear") mode = "linear";
    resize_common(c, x, scales, {}, {}, mode, "asymmetric", "floor");
  });
}

}  // namespace korch
