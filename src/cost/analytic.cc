// Work counting per primitive and the roofline formula.
#include "cost/analytic.h"

#include <algorithm>

namespace korch {

namespace {

double tensor_bytes(const TensorInfo& t) { return static_cast<double>(num_elements(t.shape)) * dtype_size(t.dtype); }

double op_weight(PrimOp op) {
  switch (op) {
    case PrimOp::Exp:
    case PrimOp::Log:
    case PrimOp::Tanh:
    case PrimOp::Sigmoid:
    case PrimOp::Erf:
    case PrimOp::Sin:
    case PrimOp::Cos:
    case PrimOp::Asin:
    case PrimOp::Acos:
    case PrimOp::Atan:
    case PrimOp::Pow: return 8;
    case PrimOp::Sqrt:
    case PrimOp::Div:
    case PrimOp::Reciprocal:
    case PrimOp::Mod: return 2;
    default: return 1;
  }
}

}  // namespace

KernelWork kernel_work(const PrimGraph& g, const Kernel& k) {
  KernelWork w;
  for (TensorId t : k.inputs) w.bytes += tensor_bytes(g.tensor(t));
  w.bytes += tensor_bytes(g.tensor(k.output));
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    const Shape& out = g.tensor(prim.output).shape;
    double out_n = static_cast<double>(num_elements(out));
    switch (prim_kind(prim.op)) {
      case PrimKind::Linear: {
        const Shape& x = g.tensor(prim.inputs[0]).shape;
        const Shape& wt = g.tensor(prim.inputs[1]).shape;
        if (prim.op == PrimOp::MatMul) {
          w.linear_flops += 2.0 * out_n * static_cast<double>(x.back());
        } else if (prim.op == PrimOp::Conv) {
          double kvol = static_cast<double>(num_elements(Shape(wt.begin() + 1, wt.end())));
          w.linear_flops += 2.0 * out_n * kvol;
        } else {
          double per_in = static_cast<double>(num_elements(Shape(wt.begin() + 1, wt.end())));
          w.linear_flops += 2.0 * static_cast<double>(num_elements(x)) * per_in;
        }
        break;
      }
      case PrimKind::Reduce: w.other_ops += static_cast<double>(num_elements(g.tensor(prim.inputs[0]).shape)); break;
      case PrimKind::Window: w.other_ops += out_n * static_cast<double>(num_elements(prim.attrs.ints("kernel"))); break;
      case PrimKind::Elementwise: w.other_ops += out_n * op_weight(prim.op); break;
      case PrimKind::Layout:
      case PrimKind::Broadcast: w.other_ops += out_n * (prim.op == PrimOp::Resize ? 4 : 0.25); break;
    }
  }
  return w;
}

double AnalyticCostModel::cost(const PrimGraph& g, const Kernel& kernel) {
  KernelWork w = kernel_work(g, kernel);
  double memory = w.bytes / (machine_.bandwidth_gbs * 1e9);
  double compute = w.linear_flops / (machine_.gemm_gflops * 1e9) + w.other_ops / (machine_.vector_gops * 1e9);
  return std::max(memory, compute) + machine_.kernel_overhead_us * 1e-6;
}

}  // namespace korch
