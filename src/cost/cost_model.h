// CostModel: prices a kernel (a primitive set) in seconds. The analytic lower bound and the
// measured (profiled) costs implement it; the orchestrator only sees this interface.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cost/profile_cache.h"
#include "plan/kernel.h"

namespace korch {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual double cost(const PrimGraph& g, const Kernel& kernel) = 0;
  virtual std::string name() const = 0;
};

// Measures kernels on a backend (used lazily by optimize(): only kernels an optimum uses).
class KernelMeasurer {
 public:
  virtual ~KernelMeasurer() = default;
  // Measured seconds, or nullopt when the backend cannot implement the kernel as one kernel
  // (or its result did not match the reference): the candidate is then dropped.
  virtual std::optional<double> measure(const PrimGraph& g, const Kernel& kernel) = 0;
  // Seconds of the kernel run by the reference fallback (always possible; used only for single
  // primitives no backend can generate, so that every model still has a plan).
  virtual double measure_fallback(const PrimGraph& g, const Kernel& kernel) = 0;
  // A cheap structural check (no compilation): false means measure() would drop the kernel.
  virtual bool implementable(const PrimGraph& g, const Kernel& kernel) = 0;
  virtual std::string name() const = 0;
  // The code generator whose schedule variants schedule() names (Backend::codegen()).
  virtual std::string codegen() const { return ""; }
  // The schedule variant (Kernel::schedule) whose time measure() returned for this kernel's
  // structure; 0 when there was one schedule or the kernel was not measured.
  virtual int schedule(const Kernel& /*kernel*/) const { return 0; }
  // What layout linking saves on the measured time of this kernel's structure: [0] when its
  // output stays in the backend's internal layout, [1 + i] when input i (Kernel::inputs
  // order) arrives in it; negative where that tensor has no internal layout. Empty when the
  // kernel converts no layouts or was not measured.
  virtual std::vector<double> link_savings(const Kernel& /*kernel*/) const { return {}; }
  // The seconds measure() would return, when a previous run already measured the kernel (a
  // profile cache hit); nullopt when that is not known without compiling anything.
  virtual std::optional<double> cached(const PrimGraph& /*g*/, const Kernel& /*kernel*/) { return std::nullopt; }
  // The kernels measure() is about to be asked for, in that order: a measurer may compile them
  // ahead (in parallel). Changes no result; measure() still decides everything.
  virtual void prepare(const PrimGraph& /*g*/, const std::vector<Kernel>& /*kernels*/) {}

  // Partition solutions kept across runs (in the profile cache), so that a warm optimise of a
  // model replays the cold run's choices instead of taking another path through lazy
  // profiling: the chosen kernels' primitive sets as offsets into the partition's primitives.
  using StoredSolution = korch::StoredSolution;
  virtual std::optional<StoredSolution> stored_solution(uint64_t /*key*/) { return std::nullopt; }
  virtual void store_solution(uint64_t /*key*/, const StoredSolution& /*solution*/) {}
};

}  // namespace korch
