// kernel_features: one pass over a kernel's primitives.
#include "cost/kernel_features.h"

#include <cmath>

#include "cost/analytic.h"

namespace korch {

std::vector<double> kernel_features(const PrimGraph& g, const Kernel& k, double estimate) {
  KernelWork w = kernel_work(g, k);
  double counts[6] = {0, 0, 0, 0, 0, 0};  // by PrimKind
  double transcendental = 0, gathers = 0, innermost_transposes = 0, depthwise = 0;
  for (PrimId p : k.prims) {
    const Primitive& prim = g.prim(p);
    counts[static_cast<int>(prim_kind(prim.op))] += 1;
    switch (prim.op) {
      case PrimOp::Exp:
      case PrimOp::Log:
      case PrimOp::Tanh:
      case PrimOp::Sigmoid:
      case PrimOp::Erf:
      case PrimOp::Pow: transcendental += 1; break;
      case PrimOp::Gather:
      case PrimOp::Resize: gathers += 1; break;
      case PrimOp::Transpose: {
        std::vector<int64_t> perm = prim.attrs.ints("perm");
        if (!perm.empty() && perm.back() != static_cast<int64_t>(perm.size()) - 1) innermost_transposes += 1;
        break;
      }
      case PrimOp::Conv: {
        const Shape& wt = g.tensor(prim.inputs[1]).shape;
        if (wt.size() >= 2 && wt[1] == 1) depthwise += 1;
        break;
      }
      default: break;
    }
  }
  const Shape& out = g.tensor(k.output).shape;
  auto lg = [](double x) { return std::log2(std::max(x, 0.0) + 1.0); };
  std::vector<double> f = {
      std::log2(std::max(estimate, 1e-9)),
      lg(w.bytes),
      lg(w.linear_flops),
      lg(w.other_ops),
      static_cast<double>(k.prims.size()),
      static_cast<double>(k.inputs.size()),
      counts[static_cast<int>(PrimKind::Elementwise)],
      counts[static_cast<int>(PrimKind::Reduce)] + counts[static_cast<int>(PrimKind::Window)],
      counts[static_cast<int>(PrimKind::Broadcast)],
      counts[static_cast<int>(PrimKind::Layout)],
      transcendental,
      gathers,
      innermost_transposes,
      depthwise,
      static_cast<double>(out.size()),
      lg(out.empty() ? 1.0 : static_cast<double>(out.back())),
  };
  return f;
}

}  // namespace korch
