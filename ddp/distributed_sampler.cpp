#include "ddp/distributed_sampler.h"

#include <numeric>
#include <stdexcept>
#include <string>

namespace mgpu {
namespace {

__extension__ typedef unsigned __int128 Uint128;  // GCC/Clang builtin, for 64x64→128 products

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (Lemire's multiply-shift with rejection).
uint64_t UniformBelow(uint64_t bound, uint64_t& state) {
  while (true) {
    const Uint128 product = static_cast<Uint128>(SplitMix64(state)) * bound;
    const uint64_t low = static_cast<uint64_t>(product);
    if (low >= bound || low >= (-bound) % bound) return static_cast<uint64_t>(product >> 64);
  }
}

}  // namespace

std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = seed;
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(UniformBelow(static_cast<uint64_t>(i) + 1, state));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), rank_(rank), world_size_(world_size), shuffle_(shuffle),
      seed_(seed), drop_last_(drop_last) {
  if (dataset_size < 1) throw std::invalid_argument("DistributedSampler: empty data set");
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("DistributedSampler: rank " + std::to_string(rank) +
                                " out of range for world size " + std::to_string(world_size));
  }
  shard_size_ = drop_last_ ? dataset_size_ / world_size_
                           : (dataset_size_ + world_size_ - 1) / world_size_;
  if (shard_size_ < 1) {
    throw std::invalid_argument("DistributedSampler: " + std::to_string(dataset_size) +
                                " samples cannot give every one of " + std::to_string(world_size) +
                                " ranks a sample with drop_last");
  }
}

std::vector<int64_t> DistributedSampler::EpochIndices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    // Mix the epoch into the seed so consecutive epochs are unrelated permutations.
    uint64_t state = seed_ ^ (0x5851f42d4c957f2dull * static_cast<uint64_t>(epoch + 1));
    order = SeededPermutation(dataset_size_, SplitMix64(state));
  } else {
    order.resize(static_cast<size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t total = shard_size_ * world_size_;
  std::vector<int64_t> shard;
  shard.reserve(static_cast<size_t>(shard_size_));
  for (int64_t position = rank_; position < total; position += world_size_) {
    shard.push_back(order[static_cast<size_t>(position % dataset_size_)]);
  }
  return shard;
}

}  // namespace mgpu
