// Specification of the distributed sampler: torch's DistributedSampler contract, with an
// order that depends on (seed, epoch) alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ddp/distributed_sampler.h"

namespace mgpu {
namespace {

TEST(DistributedSampler, SingleRankVisitsEverySampleOncePerEpoch) {
  DistributedSampler sampler(1000, 0, 1, true, 7);
  std::vector<int64_t> indices = sampler.EpochIndices(0);
  ASSERT_EQ(indices.size(), 1000u);
  std::sort(indices.begin(), indices.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(indices[static_cast<size_t>(i)], i);
}

TEST(DistributedSampler, OrderDependsOnSeedAndEpochOnly) {
  DistributedSampler a(500, 0, 1, true, 7), b(500, 0, 1, true, 7), c(500, 0, 1, true, 8);
  EXPECT_EQ(a.EpochIndices(3), b.EpochIndices(3));
  EXPECT_NE(a.EpochIndices(3), a.EpochIndices(4));
  EXPECT_NE(a.EpochIndices(3), c.EpochIndices(3));
}

TEST(DistributedSampler, WithoutShuffleKeepsDatasetOrder) {
  DistributedSampler sampler(5, 0, 1, false, 7);
  EXPECT_EQ(sampler.EpochIndices(0), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DistributedSampler, RanksGetEqualDisjointShardsPaddedByWrapping) {
  const int world = 3;
  std::multiset<int64_t> all;
  for (int rank = 0; rank < world; ++rank) {
    DistributedSampler sampler(10, rank, world, true, 1);
    std::vector<int64_t> shard = sampler.EpochIndices(0);
    EXPECT_EQ(shard.size(), 4u);  // ceil(10 / 3)
    all.insert(shard.begin(), shard.end());
  }
  EXPECT_EQ(all.size(), 12u);
  std::set<int64_t> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), 10u);  // every sample visited; two visited twice as padding
}

TEST(DistributedSampler, ShardsInterleaveTheSharedPermutation) {
  DistributedSampler whole(8, 0, 1, false, 0), first(8, 0, 2, false, 0), second(8, 1, 2, false, 0);
  EXPECT_EQ(first.EpochIndices(0), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(second.EpochIndices(0), (std::vector<int64_t>{1, 3, 5, 7}));
}

TEST(DistributedSampler, DropLastTrimsInsteadOfPadding) {
  DistributedSampler sampler(10, 2, 3, false, 0, /*drop_last=*/true);
  EXPECT_EQ(sampler.shard_size(), 3);
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(0, 0, 1, true, 0), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 2, 2, true, 0), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(2, 0, 3, true, 0, true), std::invalid_argument);
}

TEST(SeededPermutation, IsAPermutationAndReproducible) {
  std::vector<int64_t> p = SeededPermutation(100, 99);
  EXPECT_EQ(p, SeededPermutation(100, 99));
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(p, sorted);
}

}  // namespace
}  // namespace mgpu
