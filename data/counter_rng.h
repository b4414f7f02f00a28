// Counter-based random numbers: the k-th draw of a stream is a pure function of the stream's
// key and k (SplitMix64's finalizer over key + k * golden ratio), so any thread can reproduce
// any sample's draws without sharing a generator. A key is derived from (seed, a, b), e.g.
// (seed, epoch, sample index) for augmentation or (seed, split, pixel block) for synthetic data.
#pragma once

#include <cstdint>

namespace mgpu {

// SplitMix64's finalizer: a bijective 64-bit mix with good avalanche.
inline uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class CounterRng {
 public:
  explicit CounterRng(uint64_t key) : key_(key) {}
  CounterRng(uint64_t seed, uint64_t a, uint64_t b) : key_(Key(seed, a, b)) {}

  static uint64_t Key(uint64_t seed, uint64_t a, uint64_t b) {
    return Mix64(Mix64(Mix64(seed ^ 0x6a09e667f3bcc909ULL) ^ (a + 0xbb67ae8584caa73bULL)) ^
                 (b + 0x3c6ef372fe94f82bULL));
  }

  // The draw at `counter`, without advancing the stream.
  uint64_t At(uint64_t counter) const { return Mix64(key_ + kGolden * (counter + 1)); }
  uint64_t NextU64() { return At(counter_++); }
  // Uniform in [lo, hi); lo when lo == hi.
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
  }
  // Uniform integer in [lo, hi] (inclusive); exact for ranges below 2^53.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    const double range = static_cast<double>(hi - lo + 1);
    const auto offset = static_cast<int64_t>(Uniform(0.0, range));  // floor: the draw is < range
    return lo + (offset < hi - lo ? offset : hi - lo);
  }
  bool Coin() { return (NextU64() >> 63) != 0; }

 private:
  static constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace mgpu
