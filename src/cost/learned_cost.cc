// NeighbourRatioModel: a brute-force nearest-neighbour search (a few hundred to a few thousand
// examples per run, 16 features), with features scaled by their running standard deviation.
#include "cost/learned_cost.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace korch {

void NeighbourRatioModel::add(const std::vector<double>& features, double log2_ratio, bool linear) {
  if (dims_ == 0) {
    dims_ = static_cast<int>(features.size());
    mean_.assign(dims_, 0.0);
    m2_.assign(dims_, 0.0);
  }
  KORCH_CHECK(static_cast<int>(features.size()) == dims_, "kernel features of different lengths");
  if (!std::isfinite(log2_ratio)) return;
  int n = size() + 1;
  for (int d = 0; d < dims_; ++d) {
    double delta = features[d] - mean_[d];
    mean_[d] += delta / n;
    m2_[d] += delta * (features[d] - mean_[d]);
  }
  std::vector<double>& rows = features_[linear];
  rows.insert(rows.end(), features.begin(), features.end());
  ratios_[linear].push_back(log2_ratio);
}

std::optional<double> NeighbourRatioModel::predict(const std::vector<double>& features, bool linear) const {
  const std::vector<double>& ratios = ratios_[linear];
  if (neighbours_ < 1 || static_cast<int>(ratios.size()) < neighbours_) return std::nullopt;
  KORCH_CHECK(static_cast<int>(features.size()) == dims_, "kernel features of different lengths");
  std::vector<double> inverse_variance(dims_);
  int n = size();
  for (int d = 0; d < dims_; ++d) {
    double variance = n > 1 ? m2_[d] / (n - 1) : 0.0;
    inverse_variance[d] = variance > 1e-12 ? 1.0 / variance : 0.0;  // a constant feature tells nothing
  }
  const std::vector<double>& rows = features_[linear];
  std::vector<std::pair<double, double>> by_distance(ratios.size());  // (squared distance, ratio)
  for (size_t i = 0; i < ratios.size(); ++i) {
    const double* row = &rows[i * dims_];
    double distance = 0;
    for (int d = 0; d < dims_; ++d) {
      double delta = row[d] - features[d];
      distance += delta * delta * inverse_variance[d];
    }
    by_distance[i] = {distance, ratios[i]};
  }
  std::nth_element(by_distance.begin(), by_distance.begin() + (neighbours_ - 1), by_distance.end());
  double smallest = by_distance[0].second;
  for (int i = 1; i < neighbours_; ++i) smallest = std::min(smallest, by_distance[i].second);
  return smallest;
}

}  // namespace korch
