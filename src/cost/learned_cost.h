// A cost model learned while profiling: how much slower than its roofline estimate a kernel runs,
// predicted from the kernels measured so far that resemble it. Lazy profiling reports its median
// error beside the prices' (korch optimize's summary, --json price_errors) and, on request, ranks
// the rivals it measures beside a newly measured kernel by it (OptimizeOptions::learned_rival_ranking).
//
// The model is a nearest-neighbour one: features (kernel_features.h, each scaled by its standard
// deviation over the examples) pick the `neighbours` closest measured kernels of the same class
// (linear or memory-bound), and the prediction is the smallest of their measured/estimate ratios
// (log2), the optimistic end of what similar kernels did. Predictions need `neighbours` examples
// of the class; until then there are none.
#pragma once
#include <optional>
#include <vector>

namespace korch {

class NeighbourRatioModel {
 public:
  explicit NeighbourRatioModel(int neighbours = 8) : neighbours_(neighbours) {}

  // A measured kernel: its features, log2(measured / estimate) and class.
  void add(const std::vector<double>& features, double log2_ratio, bool linear);
  // log2 of the predicted measured/estimate ratio of a kernel with these features; nullopt with
  // fewer than `neighbours` examples of its class.
  std::optional<double> predict(const std::vector<double>& features, bool linear) const;
  // Examples added (both classes); predictions change only when this does.
  int size() const { return static_cast<int>(ratios_[0].size() + ratios_[1].size()); }

 private:
  int neighbours_;
  int dims_ = 0;
  std::vector<double> features_[2];  // row-major, dims_ per example, by class
  std::vector<double> ratios_[2];
  // Running mean and sum of squared deviations per feature (Welford), over both classes.
  std::vector<double> mean_, m2_;
};

}  // namespace korch
