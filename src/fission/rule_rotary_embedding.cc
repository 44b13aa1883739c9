// Fission rule for RotaryEmbedding (opset 23), as ONNX's reference: [B, H, S, D] is moved to
// [B, S, H, D] (3-D [B, S, H*D] split by num_heads); the first rotary_embedding_dim channels,
// as halves or (interleaved) even/odd pairs x1, x2, become x1 cos - x2 sin and x1 sin + x2 cos
// with the caches gathered at position_ids (when given); the rest pass through.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_rotary_embedding_rule() {
  register_fission_rule("RotaryEmbedding", [](FissionContext& c) {
    TensorId x = c.input(0), cos = c.input(1), sin = c.input(2);
    const Shape original = c.shape(x);
    int64_t rank = c.rank(x);
    if (rank != 3 && rank != 4) c.error("input must be 3-D or 4-D");
    auto perm = Attrs().set("perm", std::vector<int64_t>{0, 2, 1, 3});
    if (rank == 4) {
      x = c.emit(PrimOp::Transpose, {x}, perm);
    } else {
      int64_t heads = c.attr_i("num_heads", 0);
      if (heads <= 0 || original[2] % heads) c.error("3-D input needs num_heads dividing the hidden size");
      x = c.reshape(x, {original[0], original[1], heads, original[2] / heads});
    }
    const Shape s = c.shape(x);  // [B, S, H, D]
    int64_t head = s[3], dim = c.attr_i("rotary_embedding_dim", 0);
    if (dim == 0) dim = head;
    if (dim > head || dim % 2) c.error("rotary_embedding_dim ", dim, " must be even and at most ", head);
    int64_t half = dim / 2;
    bool interleaved = c.attr_i("interleaved", 0) != 0;
    if (c.has_input(3)) {
      TensorId pos = c.input(3);
      cos = c.emit(PrimOp::Gather, {cos, pos}, Attrs().set("axis", int64_t{0}));
      sin = c.emit(PrimOp::Gather, {sin, pos}, Attrs().set("axis", int64_t{0}));
    }
    if (c.shape(cos).back() != half || c.shape(sin).back() != half)
      c.error("the caches' last dimension must be rotary_embedding_dim / 2 = ", half);
    cos = insert_axis(c, cos, c.rank(cos) - 1);  // [B, S, 1, half]
    sin = insert_axis(c, sin, c.rank(sin) - 1);
    TensorId rot = dim == head ? x : slice_axis(c, x, 3, 0, dim);
    TensorId x1 = interleaved ? slice_axis(c, rot, 3, 0, half, 2) : slice_axis(c, rot, 3, 0, half);
    TensorId x2 = interleaved ? slice_axis(c, rot, 3, 1, half, 2) : slice_axis(c, rot, 3, half, half);
    TensorId real = c.binary(PrimOp::Sub, c.binary(PrimOp::Mul, cos, x1), c.binary(PrimOp::Mul, sin, x2));
    TensorId imag = c.binary(PrimOp::Add, c.binary(PrimOp::Mul, sin, x1), c.binary(PrimOp::Mul, cos, x2));
    Attrs last = Attrs().set("axis", int64_t{3});
    if (interleaved) {
      Shape pairs = c.shape(real);
      pairs.push_back(1);
      TensorId both =
          c.emit(PrimOp::Concat, {c.reshape(real, pairs), c.reshape(imag, pairs)}, Attrs().set("axis", int64_t{4}));
      rot = c.reshape(both, c.shape(rot));
    } else {
      rot = c.emit(PrimOp::Concat, {real, imag}, last);
    }
    TensorId y = dim == head ? rot : c.emit(PrimOp::Concat, {rot, slice_axis(c, x, 3, dim, head - dim)}, last);
    c.set_output(0, rank == 4 ? c.emit(PrimOp::Transpose, {y}, perm) : c.reshape(y, original));
  });
}

}  // namespace korch
