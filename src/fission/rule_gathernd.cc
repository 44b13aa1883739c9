// Fission rule for GatherND: the index tuples become linear offsets into the data with its
// batch and indexed axes flattened (sum of index * stride, plus each batch's base offset), then
// one Gather along axis 0.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

void register_gathernd_rule() {
  register_fission_rule("GatherND", [](FissionContext& c) {
    TensorId data = c.input(0), indices = c.input(1);
    const Shape ds = c.shape(data), is = c.shape(indices);
    int64_t r = c.rank(data), q = c.rank(indices), b = c.attr_i("batch_dims", 0);
    if (q < 1) c.error("indices must have rank >= 1");
    int64_t k = is.back();
    if (b < 0 || b >= q || b + k > r) c.error("batch_dims ", b, " and index depth ", k, " do not fit data rank ", r);
    for (int64_t i = 0; i < b; ++i)
      if (is[i] != ds[i]) c.error("batch dimension ", i, " differs between data and indices");
    int64_t batch = 1, block = 1;
    for (int64_t i = 0; i < b; ++i) batch *= ds[i];
    std::vector<int64_t> dims(ds.begin() + b, ds.begin() + b + k), strides(k, 1);
    for (int64_t d = k - 2; d >= 0; --d) strides[d] = strides[d + 1] * dims[d + 1];
    for (int64_t d : dims) block *= d;
    Shape tail(q, 1);
    tail[q - 1] = k;
    TensorId idx = wrap_negative(c, indices, c.constant(TensorData::from_i64(DType::I64, tail, dims)));
    TensorId linear = c.reduce(PrimOp::ReduceSum,
                               c.binary(PrimOp::Mul, idx, c.constant(TensorData::from_i64(DType::I64, tail, strides))),
                               {q - 1}, false);
    if (b > 0) {
      Shape bs(q - 1, 1);
      std::vector<int64_t> base(batch);
      for (int64_t i = 0; i < b; ++i) bs[i] = is[i];
      for (int64_t i = 0; i < batch; ++i) base[i] = i * block;
      linear = c.binary(PrimOp::Add, linear, c.constant(TensorData::from_i64(DType::I64, bs, base)));
    }
    Shape flat = {batch * block};
    flat.insert(flat.end(), ds.begin() + b + k, ds.end());
    c.set_output(0, c.emit(PrimOp::Gather, {c.reshape(data, flat), linear}, Attrs().set("axis", int64_t{0})));
  });
}

}  // namespace korch
