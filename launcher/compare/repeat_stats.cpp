#include "launcher/compare/repeat_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace mgpu {

RepeatStats SummarizeRepeats(const std::vector<double>& samples) {
  if (samples.empty()) throw std::invalid_argument("SummarizeRepeats: no samples");
  for (double s : samples) {
    if (!std::isfinite(s)) throw std::invalid_argument("SummarizeRepeats: a sample is not finite");
  }
  std::vector<size_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return samples[a] < samples[b]; });
  const size_t n = samples.size();
  RepeatStats stats;
  stats.representative = order[n / 2];
  stats.median = n % 2 == 1 ? samples[order[n / 2]] : (samples[order[n / 2 - 1]] + samples[order[n / 2]]) / 2;
  stats.min = samples[order.front()];
  stats.max = samples[order.back()];
  stats.spread = stats.median > 0 ? (stats.max - stats.min) / stats.median : 0;
  for (size_t i = 0; i < n && n > 1; ++i) {
    if (std::abs(samples[i] - stats.median) > kOutlierFraction * stats.median) stats.outliers.push_back(i);
  }
  return stats;
}

}  // namespace mgpu
