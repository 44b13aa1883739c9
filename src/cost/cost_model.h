// CostModel: prices a kernel (a primitive set) in seconds. The analytic lower bound and the
// measured (profiled) costs implement it; the orchestrator only sees this interface.
#pragma once
#include <string>

#include "orchestrate/kernel.h"

namespace korch {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double cost(const PrimGraph& g, const Kernel& kernel) = 0;
  virtual std::string name() const = 0;
};

}  // namespace korch
