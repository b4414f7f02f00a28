// Which sample indices a rank visits in an epoch, with torch.utils.data.DistributedSampler's
// contract: every rank gets the same number of indices; without drop_last the shuffled order
// is padded by wrapping around so it divides evenly; rank r takes positions r, r+W, r+2W, ...
//
// The order depends only on (seed, epoch): the same on every rank, machine and worker count.
#pragma once

#include <cstdint>
#include <vector>

namespace mgpu {

class DistributedSampler {
 public:
  // Throws std::invalid_argument if dataset_size < 1, world_size < 1 or rank out of range.
  DistributedSampler(int64_t dataset_size, int rank, int world_size, bool shuffle, uint64_t seed,
                     bool drop_last = false);

  // This rank's indices for `epoch`, in visiting order.
  std::vector<int64_t> EpochIndices(int64_t epoch) const;
  // Number of indices every rank receives per epoch.
  int64_t shard_size() const { return shard_size_; }

 private:
  int64_t dataset_size_;
  int rank_;
  int world_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t shard_size_;
};

// A permutation of [0, n) determined by `seed` alone (Fisher-Yates over a SplitMix64 stream),
// independent of the C++ standard library's distribution implementations.
std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed);

}  // namespace mgpu
