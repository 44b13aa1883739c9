// Shape and dtype inference for every primitive. Also documents the attribute contract of
// each primitive (fission produces exactly these attributes; the reference executor and
// backends consume them):
//   Cast: to (DType as int)            Mod: fmod (0 = Python-style, 1 = C fmod)
//   Reduce*: axes (sorted, normalised), keepdims       ArgMax/ArgMin: axis, keepdims, select_last_index
//   Broadcast: shape                   Transpose: perm            Reshape: shape (fully resolved)
//   Slice: starts, steps, sizes (one per axis; out[i] = in[starts + i*steps])
//   Concat: axis                       Pad: pads (begins then ends, may be negative), mode, value
//   Gather: axis (inputs: data, indices; negative indices wrap)
//   Resize: sizes, scales, roi, mode, coord_mode, nearest_mode, cubic_coeff_a, exclude_outside,
//           extrapolation_value
//   MaxPool/AvgPool: kernel, strides, pads (begins then ends), dilations, ceil_mode, count_include_pad
//   Conv: strides, pads, dilations, group       ConvTranspose: + out_spatial (output spatial dims)
#include <algorithm>

#include "ir/prim_graph.h"
#include "util/error.h"

namespace korch {

namespace {

Shape pool_output_shape(const Shape& in, const Attrs& a) {
  const auto& k = a.ints("kernel");
  const auto& s = a.ints("strides");
  const auto& p = a.ints("pads");
  const auto& d = a.ints("dilations");
  size_t nsp = k.size();
  if (in.size() != nsp + 2) fail("pooling expects a tensor of rank ", nsp + 2, ", got ", shape_str(in));
  Shape out = {in[0], in[1]};
  for (size_t i = 0; i < nsp; ++i) {
    int64_t span = (k[i] - 1) * d[i] + 1;
    int64_t padded = in[2 + i] + p[i] + p[nsp + i];
    if (padded < span) fail("pooling window ", span, " larger than padded input ", padded);
    int64_t o;
    if (a.i("ceil_mode")) {
      o = (padded - span + s[i] - 1) / s[i] + 1;
      if ((o - 1) * s[i] >= in[2 + i] + p[i]) --o;
    } else {
      o = (padded - span) / s[i] + 1;
    }
    out.push_back(o);
  }
  return out;
}

Shape matmul_shape(const Shape& a, const Shape& b) {
  if (a.size() < 2 || b.size() < 2) fail("MatMul primitive needs rank >= 2 operands");
  if (a[a.size() - 1] != b[b.size() - 2]) fail("MatMul inner dimensions differ: ", shape_str(a), " x ", shape_str(b));
  Shape batch = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
  batch.push_back(a[a.size() - 2]);
  batch.push_back(b[b.size() - 1]);
  return batch;
}

}  // namespace

void infer_primitive(PrimOp op, const std::vector<const TensorInfo*>& in, const Attrs& a, DType* dtype, Shape* shape) {
  PrimKind kind = prim_kind(op);
  if (kind == PrimKind::Elementwise) {
    Shape s = in[0]->shape;
    for (size_t i = 1; i < in.size(); ++i) s = broadcast_shapes(s, in[i]->shape);
    *shape = s;
    switch (op) {
      case PrimOp::Cast: *dtype = static_cast<DType>(a.i("to")); break;
      case PrimOp::Not:
      case PrimOp::Equal:
      case PrimOp::Less:
      case PrimOp::Greater:
      case PrimOp::LessEqual:
      case PrimOp::GreaterEqual:
      case PrimOp::And:
      case PrimOp::Or:
      case PrimOp::Xor: *dtype = DType::Bool; break;
      case PrimOp::Where: *dtype = in[1]->dtype; break;
      default: *dtype = in[0]->dtype;
    }
    if (op == PrimOp::Where && in[1]->dtype != in[2]->dtype) fail("Where branches have different dtypes");
    bool integer_only = op == PrimOp::BitNot || op == PrimOp::BitAnd || op == PrimOp::BitOr || op == PrimOp::BitXor ||
                        op == PrimOp::ShiftLeft || op == PrimOp::ShiftRight;
    if (integer_only && (is_floating(in[0]->dtype) || in[0]->dtype == DType::Bool))
      fail(prim_op_name(op), " needs integer operands, got ", dtype_name(in[0]->dtype));
    bool float_only = op == PrimOp::Asin || op == PrimOp::Acos || op == PrimOp::Atan;
    if (float_only && !is_floating(in[0]->dtype))
      fail(prim_op_name(op), " needs floating operands, got ", dtype_name(in[0]->dtype));
    if (prim_arity(op) == 2 && op != PrimOp::Pow && in[0]->dtype != in[1]->dtype)
      fail(prim_op_name(op), " operands have different dtypes: ", dtype_name(in[0]->dtype), " and ",
           dtype_name(in[1]->dtype));
    return;
  }
  const Shape& x = in[0]->shape;
  int64_t rank = static_cast<int64_t>(x.size());
  *dtype = in[0]->dtype;
  switch (op) {
    case PrimOp::ReduceSum:
    case PrimOp::ReduceMean:
    case PrimOp::ReduceMax:
    case PrimOp::ReduceMin:
    case PrimOp::ReduceProd: {
      const auto& axes = a.ints("axes");
      bool keep = a.i("keepdims") != 0;
      Shape out;
      for (int64_t i = 0; i < rank; ++i) {
        bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (reduced && x[i] == 0 && (op == PrimOp::ReduceMax || op == PrimOp::ReduceMin))
          fail("cannot take max/min over an empty axis");
        if (!reduced)
          out.push_back(x[i]);
        else if (keep)
          out.push_back(1);
      }
      for (int64_t ax : axes) KORCH_CHECK(ax >= 0 && ax < rank, "reduce axis ", ax);
      *shape = out;
      return;
    }
    case PrimOp::ArgMax:
    case PrimOp::ArgMin: {
      int64_t axis = a.i("axis");
      KORCH_CHECK(axis >= 0 && axis < rank);
      Shape out = x;
      if (a.i("keepdims"))
        out[axis] = 1;
      else
        out.erase(out.begin() + axis);
      *shape = out;
      *dtype = DType::I64;
      return;
    }
    case PrimOp::Broadcast: {
      const auto& target = a.ints("shape");
      if (broadcast_shapes(x, target) != target) fail("cannot broadcast ", shape_str(x), " to ", shape_str(target));
      *shape = target;
      return;
    }
    case PrimOp::Transpose: {
      const auto& perm = a.ints("perm");
      KORCH_CHECK(static_cast<int64_t>(perm.size()) == rank, "perm rank");
      std::vector<char> seen(rank, 0);
      Shape out;
      for (int64_t p : perm) {
        if (p < 0 || p >= rank || seen[p]) fail("invalid transpose permutation");
        seen[p] = 1;
        out.push_back(x[p]);
      }
      *shape = out;
      return;
    }
    case PrimOp::Reshape: {
      const auto& target = a.ints("shape");
      if (num_elements(target) != num_elements(x)) fail("cannot reshape ", shape_str(x), " to ", shape_str(target));
      *shape = target;
      return;
    }
    case PrimOp::Slice: {
      const auto& starts = a.ints("starts");
      const auto& steps = a.ints("steps");
      const auto& sizes = a.ints("sizes");
      KORCH_CHECK(static_cast<int64_t>(sizes.size()) == rank && starts.size() == sizes.size() &&
                  steps.size() == sizes.size());
      for (int64_t i = 0; i < rank; ++i) {
        if (sizes[i] == 0) continue;
        int64_t last = starts[i] + (sizes[i] - 1) * steps[i];
        KORCH_CHECK(starts[i] >= 0 && starts[i] < x[i] && last >= 0 && last < x[i], "slice bounds");
      }
      *shape = sizes;
      return;
    }
    case PrimOp::Concat: {
      int64_t axis = a.i("axis");
      KORCH_CHECK(axis >= 0 && axis < rank);
      Shape out = x;
      out[axis] = 0;
      for (const TensorInfo* t : in) {
        if (t->shape.size() != x.size()) fail("Concat inputs have different ranks");
        for (int64_t i = 0; i < rank; ++i)
          if (i != axis && t->shape[i] != x[i])
            fail("Concat inputs differ outside the axis: ", shape_str(x), " vs ", shape_str(t->shape));
        if (t->dtype != in[0]->dtype) fail("Concat inputs have different dtypes");
        out[axis] += t->shape[axis];
      }
      *shape = out;
      return;
    }
    case PrimOp::Pad: {
      const auto& pads = a.ints("pads");
      KORCH_CHECK(static_cast<int64_t>(pads.size()) == 2 * rank, "pads size");
      Shape out = x;
      for (int64_t i = 0; i < rank; ++i) {
        if (__builtin_add_overflow(x[i], pads[i], &out[i]) || __builtin_add_overflow(out[i], pads[rank + i], &out[i]))
          fail("Pad pads overflow");
        if (out[i] < 0) fail("Pad produces a negative dimension");
      }
      const std::string& mode = a.s("mode");
      if (mode != "constant" && mode != "reflect" && mode != "edge") fail("unsupported Pad mode '", mode, "'");
      *shape = out;
      return;
    }
    case PrimOp::Gather: {
      int64_t axis = a.i("axis");
      KORCH_CHECK(axis >= 0 && axis < rank);
      if (in[1]->dtype != DType::I64 && in[1]->dtype != DType::I32) fail("Gather indices must be int32/int64");
      Shape out(x.begin(), x.begin() + axis);
      out.insert(out.end(), in[1]->shape.begin(), in[1]->shape.end());
      out.insert(out.end(), x.begin() + axis + 1, x.end());
      *shape = out;
      return;
    }
    case PrimOp::Resize: {
      const auto& sizes = a.ints("sizes");
      KORCH_CHECK(static_cast<int64_t>(sizes.size()) == rank);
      *shape = sizes;
      return;
    }
    case PrimOp::MaxPool:
    case PrimOp::AvgPool: *shape = pool_output_shape(x, a); return;
    case PrimOp::MatMul:
      if (in[0]->dtype != in[1]->dtype) fail("MatMul operands have different dtypes");
      *shape = matmul_shape(x, in[1]->shape);
      return;
    case PrimOp::Conv: {
      const Shape& w = in[1]->shape;
      size_t nsp = w.size() - 2;
      int64_t group = a.i("group");
      if (x.size() != w.size() || x.size() < 3)
        fail("Conv input ", shape_str(x), " and weight ", shape_str(w), " ranks differ");
      if (x[1] != w[1] * group) fail("Conv channels: input ", x[1], ", weight ", w[1], " x group ", group);
      if (w[0] % group) fail("Conv output channels not divisible by group");
      const auto& s = a.ints("strides");
      const auto& p = a.ints("pads");
      const auto& d = a.ints("dilations");
      Shape out = {x[0], w[0]};
      for (size_t i = 0; i < nsp; ++i) {
        int64_t span = (w[2 + i] - 1) * d[i] + 1;
        int64_t padded = x[2 + i] + p[i] + p[nsp + i];
        if (padded < span) fail("Conv kernel larger than padded input");
        out.push_back((padded - span) / s[i] + 1);
      }
      *shape = out;
      return;
    }
    case PrimOp::ConvTranspose: {
      const Shape& w = in[1]->shape;
      int64_t group = a.i("group");
      if (x.size() != w.size() || x.size() < 3) fail("ConvTranspose ranks differ");
      if (x[1] != w[0]) fail("ConvTranspose channels: input ", x[1], ", weight ", w[0]);
      Shape out = {x[0], w[1] * group};
      for (int64_t v : a.ints("out_spatial")) out.push_back(v);
      KORCH_CHECK(out.size() == x.size());
      *shape = out;
      return;
    }
    default: break;
  }
  fail("no shape inference for primitive ", prim_op_name(op));
}

}  // namespace korch
