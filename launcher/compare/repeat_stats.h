// The samples of one comparison row run `--repeat N` times: which repeat stands for the row, and
// how far the others stray from it.
//
//   RepeatStats s = SummarizeRepeats({19447, 158, 19210});
//   s.representative == 2  (the median sample's index), s.median == 19210,
//   s.outliers == {1}      (158 is far from the median)
//
// A sample is an outlier when it lies more than kOutlierFraction away from the samples' median: a
// robust rule that a single 100x slow run (another process taking the CPU) cannot mask by
// dragging a mean, and that needs no distribution assumed for 2-5 samples. Two samples that
// disagree that much are both flagged: with two, neither can be told the disturbed one.
#pragma once

#include <cstddef>
#include <vector>

namespace mgpu {

// 25%: run-to-run noise of a busy machine stays well inside it (the repeats of one row on the
// 2-core VM differ by a few percent), a disturbed run does not.
inline constexpr double kOutlierFraction = 0.25;

struct RepeatStats {
  // Index of the median sample; for an even count the upper middle, since a disturbance (another
  // process on the CPU) only ever slows a run.
  size_t representative = 0;
  double median = 0;            // the samples' median (the mean of the middle two for an even count)
  double min = 0, max = 0;
  double spread = 0;            // (max - min) / median; 0 for one sample
  std::vector<size_t> outliers;  // indices, ascending
};

// `samples` must be non-empty and finite (throws std::invalid_argument otherwise).
RepeatStats SummarizeRepeats(const std::vector<double>& samples);

}  // namespace mgpu
