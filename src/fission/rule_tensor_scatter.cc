// Fission rule for TensorScatter (opset 24): the update's sequence (along `axis`, default -2)
// written into the cache at each batch's write index, linearly or circularly (modulo the cache
// length). Cache position s of batch b takes update position s - write_index[b] (mod the cache
// length when circular) when that lies in the update, else keeps the cache's value: one Gather
// of the update's sequence positions and a Where. A linear write past the cache's end, or a
// negative write index, makes the Gather's index out of range: a run-time error.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_tensor_scatter_rule() {
  register_fission_rule("TensorScatter", [](FissionContext& c) {
    TensorId cache = c.input(0), update = c.input(1);
    const Shape cs = c.shape(cache), us = c.shape(update);
    int64_t rank = c.rank(cache);
    if (c.rank(update) != rank || c.dtype(update) != c.dtype(cache))
      c.error("the update must have the cache's rank and type");
    int64_t axis = normalize_axis(c.attr_i("axis", -2), rank);
    if (axis == 0) c.error("axis must not be the batch axis 0");
    std::string mode = c.attr_s("mode", "linear");
    if (mode != "linear" && mode != "circular") c.error("unknown mode '", mode, "'");
    for (int64_t i = 0; i < rank; ++i)
      if (i == axis ? us[i] > cs[i] : us[i] != cs[i])
        c.error("update shape ", shape_str(us), " does not fit cache shape ", shape_str(cs));
    int64_t batch = cs[0], length = cs[axis], written = us[axis], middle = 1, trailing = 1;
    for (int64_t i = 1; i < axis; ++i) middle *= cs[i];
    for (int64_t i = axis + 1; i < rank; ++i) trailing *= cs[i];
    if (written == 0) {
      c.set_output(0, c.unary(PrimOp::Copy, cache));
      return;
    }
    if (c.has_input(2) && c.shape(c.input(2)) != Shape{batch}) c.error("write_indices must have shape [", batch, "]");
    TensorId start = c.has_input(2) ? c.reshape(c.cast(c.input(2), DType::I64), {batch, 1})
                                    : c.constant(TensorData(DType::I64, {batch, 1}));
    // relative[b, s]: the update position cache position s reads.
    TensorId relative = c.binary(PrimOp::Sub, iota_along(c, length, 2, 1), start);
    if (mode == "circular")
      relative = c.emit(PrimOp::Mod, {relative, c.scalar(static_cast<double>(length), DType::I64)},
                        Attrs().set("fmod", int64_t{0}));
    TensorId inside = c.binary(PrimOp::And, c.binary(PrimOp::GreaterEqual, relative, c.scalar(0, DType::I64)),
                               c.binary(PrimOp::Less, relative, c.scalar(static_cast<double>(written), DType::I64)));
    TensorId source =
        c.binary(PrimOp::Add, c.emit(PrimOp::Where, {inside, relative, c.scalar(0, DType::I64)}),
                 c.binary(PrimOp::Mul, iota_along(c, batch, 2, 0), c.scalar(static_cast<double>(written), DType::I64)));
    if (mode == "linear") {
      TensorId end = c.binary(PrimOp::Add, start, c.scalar(static_cast<double>(written), DType::I64));
      TensorId invalid = c.binary(PrimOp::Or, c.binary(PrimOp::Less, start, c.scalar(0, DType::I64)),
                                  c.binary(PrimOp::Greater, end, c.scalar(static_cast<double>(length), DType::I64)));
      source = c.emit(PrimOp::Where, {invalid, c.scalar(static_cast<double>(batch * written), DType::I64), source});
    }
    // The update as [batch * written, middle, trailing] rows; gathered to [batch, length, middle, trailing].
    TensorId rows = c.emit(PrimOp::Transpose, {c.reshape(update, {batch, middle, written, trailing})},
                           Attrs().set("perm", std::vector<int64_t>{0, 2, 1, 3}));
    rows = c.reshape(rows, {batch * written, middle, trailing});
    TensorId gathered = c.emit(PrimOp::Gather, {rows, source}, Attrs().set("axis", int64_t{0}));
    gathered = c.emit(PrimOp::Transpose, {gathered}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1, 3}));
    TensorId mask = c.reshape(inside, {batch, 1, length, 1});
    TensorId y = c.emit(PrimOp::Where, {mask, gathered, c.reshape(cache, {batch, middle, length, trailing})});
    c.set_output(0, c.reshape(y, cs));
  });
}

}  // namespace korch
