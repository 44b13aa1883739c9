// Analytic cost: a roofline lower bound per kernel,
//   max(bytes moved / bandwidth, linear flops / GEMM rate + other ops / vector rate) + launch overhead,
// where bytes moved are the kernel's external inputs plus its output (intermediates stay in
// registers/cache). It is the cost the BLP uses before (and where) nothing is measured.
#pragma once
#include "cost/cost_model.h"
#include "cost/machine.h"

namespace korch {

struct KernelWork {
  double bytes = 0;         // external inputs + output
  double linear_flops = 0;  // MatMul / Conv / ConvTranspose multiply-adds x 2
  double other_ops = 0;     // elementwise / reduce / window operations, weighted
};

KernelWork kernel_work(const PrimGraph& g, const Kernel& k);

class AnalyticCostModel : public CostModel {
 public:
  explicit AnalyticCostModel(MachineFigures machine) : machine_(machine) {}
  double cost(const PrimGraph& g, const Kernel& kernel) override;
  std::string name() const override { return "analytic"; }
  const MachineFigures& machine() const { return machine_; }

 private:
  MachineFigures machine_;
};

}  // namespace korch
