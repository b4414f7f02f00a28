// Specification of the batch loader: batches follow the index list exactly, are normalized,
// and are the same whatever the number of worker threads.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>

#include "common/status.h"
#include "data/batch_loader.h"
#include "data/image_dataset.h"
#include "ddp/distributed_sampler.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

ImageDataset MakeDataset(int64_t n) {
  ImageDataset ds;
  ds.name = "ramp";
  ds.images = torch::empty({n, 1, 2, 2}, torch::kUInt8);
  ds.labels = torch::empty({n}, torch::kInt64);
  for (int64_t i = 0; i < n; ++i) {
    ds.images[i].fill_(static_cast<int64_t>(i % 256));
    ds.labels[i] = i % 10;
  }
  ds.class_names = std::vector<std::string>(10, "c");
  ds.mean = {0.5f};
  ds.stddev = {0.25f};
  return ds;
}

std::vector<Batch> DrainEpoch(BatchLoader& loader, std::vector<int64_t> indices) {
  loader.StartEpoch(std::move(indices));
  std::vector<Batch> batches;
  while (auto batch = loader.Next()) batches.push_back(std::move(*batch));
  return batches;
}

TEST(BatchLoader, BatchesFollowTheIndexListWithASmallerLastBatch) {
  ImageDataset ds = MakeDataset(10);
  BatchLoader loader(ds, LoaderOptions{4, 0});
  std::vector<Batch> batches = DrainEpoch(loader, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(loader.batches_in_epoch(), 3);
  EXPECT_EQ(batches[2].images.size(0), 2);
  EXPECT_EQ(batches[0].labels[0].item<int64_t>(), 9);
  EXPECT_EQ(batches[2].labels[1].item<int64_t>(), 0);
}

TEST(BatchLoader, NormalizesWithDatasetMeanAndStddev) {
  ImageDataset ds = MakeDataset(4);
  BatchLoader loader(ds, LoaderOptions{4, 0});
  std::vector<Batch> batches = DrainEpoch(loader, {0, 1, 2, 3});
  // pixel value 2 → (2/255 - 0.5) / 0.25
  EXPECT_NEAR(batches[0].images[2][0][1][1].item<float>(), (2.0f / 255.0f - 0.5f) / 0.25f, 1e-6);
  EXPECT_EQ(batches[0].images.dtype(), torch::kFloat32);
}

TEST(BatchLoader, WorkerThreadsProduceIdenticalBatchesInOrder) {
  ImageDataset ds = MakeDataset(1000);
  const std::vector<int64_t> order = DistributedSampler(1000, 0, 1, true, 3).EpochIndices(0);
  BatchLoader serial(ds, LoaderOptions{32, 0});
  std::vector<Batch> expected = DrainEpoch(serial, order);
  for (int workers : {1, 2, 4}) {
    BatchLoader threaded(ds, LoaderOptions{32, workers});
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<Batch> got = DrainEpoch(threaded, order);
      ASSERT_EQ(got.size(), expected.size()) << workers << " workers";
      for (size_t b = 0; b < got.size(); ++b) {
        EXPECT_EQ(got[b].index, static_cast<int64_t>(b));
        EXPECT_TRUE(torch::equal(got[b].images, expected[b].images)) << "batch " << b;
        EXPECT_TRUE(torch::equal(got[b].labels, expected[b].labels)) << "batch " << b;
      }
    }
  }
}

TEST(BatchLoader, ABatchBufferIsReusedOnlyOnceNothingHoldsIt) {
  ImageDataset ds = MakeDataset(40);
  BatchLoader loader(ds, LoaderOptions{8, 0});
  std::vector<int64_t> order(40);
  std::iota(order.begin(), order.end(), 0);
  loader.StartEpoch(order);
  loader.Next();  // dropped at once
  std::optional<Batch> second = loader.Next();
  EXPECT_EQ(loader.image_buffers_allocated(), 1) << "a dropped batch's buffer is reused";
  const torch::Tensor row = second->images[3];  // a view keeps the buffer
  const torch::Tensor expected = row.clone();
  second.reset();
  while (loader.Next()) {
  }
  EXPECT_EQ(loader.image_buffers_allocated(), 2) << "one more buffer while the view is held, then reused";
  EXPECT_TRUE(torch::equal(row, expected)) << "the held view was overwritten";
  const std::vector<Batch> held = DrainEpoch(loader, order);
  EXPECT_EQ(loader.image_buffers_allocated(), 2 + 4) << "held batches each have their own (one spare was free)";
}

TEST(BatchLoader, ALastBatchOfAnotherShapeTakesAFreeSparesPlace) {
  ImageDataset ds = MakeDataset(100);  // 12 batches of 8 and one of 4
  BatchLoader loader(ds, LoaderOptions{8, 0});
  std::vector<int64_t> order(100);
  std::iota(order.begin(), order.end(), 0);
  loader.StartEpoch(order);
  std::vector<Batch> held;
  for (int k = 0; k < 5; ++k) held.push_back(*loader.Next());  // four spares, all held, and one more
  held.clear();
  while (loader.Next()) {
  }
  EXPECT_EQ(loader.image_buffers_allocated(), 6) << "five held (four kept as spares), then the last batch's";
  loader.StartEpoch(order);
  while (loader.Next()) {
  }
  EXPECT_EQ(loader.image_buffers_allocated(), 6) << "the next pass reuses the spares, the last batch's included";
}

TEST(BatchLoader, WorkersNeverReuseABufferTheCallerHolds) {
  ImageDataset ds = MakeDataset(2000);
  std::vector<int64_t> order(2000);
  std::iota(order.begin(), order.end(), 0);
  BatchLoader loader(ds, LoaderOptions{16, 3});
  loader.StartEpoch(order);
  const Batch held = *loader.Next();
  const torch::Tensor expected = held.images.clone();
  while (loader.Next()) {
  }
  EXPECT_TRUE(torch::equal(held.images, expected));
}

TEST(BatchLoader, AbandonedEpochDoesNotLeakIntoTheNext) {
  ImageDataset ds = MakeDataset(200);
  BatchLoader loader(ds, LoaderOptions{10, 3});
  std::vector<int64_t> forward(200), backward(200);
  std::iota(forward.begin(), forward.end(), 0);
  std::iota(backward.rbegin(), backward.rend(), 0);
  loader.StartEpoch(forward);
  ASSERT_TRUE(loader.Next().has_value());  // leave the pass unfinished
  std::vector<Batch> batches = DrainEpoch(loader, backward);
  ASSERT_EQ(batches.size(), 20u);
  EXPECT_EQ(batches[0].labels[0].item<int64_t>(), 199 % 10);
  EXPECT_EQ(batches[19].labels[9].item<int64_t>(), 0);
}

TEST(BatchLoader, WorkerFailureReachesTheCaller) {
  ImageDataset ds = MakeDataset(10);
  ds.images = ds.images.to(torch::kFloat32);  // wrong pixel type: building a batch throws
  BatchLoader loader(ds, LoaderOptions{4, 2});
  loader.StartEpoch({0, 1, 2, 3});
  EXPECT_ANY_THROW(loader.Next());
}

TEST(BatchLoader, RejectsBadOptions) {
  ImageDataset ds = MakeDataset(4);
  EXPECT_THROW(BatchLoader(ds, LoaderOptions{0, 0}), std::invalid_argument);
  EXPECT_THROW(BatchLoader(ds, LoaderOptions{4, -1}), std::invalid_argument);
}

// This process's virtual memory size (VmSize), in bytes.
int64_t VirtualMemoryBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  }
  return -1;
}

// Leaves this process address space for two more 8 MiB thread stacks, starts a loader of 64
// threads and exits 0 after mgpu::Error with exit code 1 (its message on stderr), else 1.
[[noreturn]] void StartLoaderWithRoomForTwoThreads(const ImageDataset& ds) {
  constexpr int64_t kStack = int64_t{8} << 20;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, kStack);
  pthread_setattr_default_np(&attributes);
  const rlim_t room = static_cast<rlim_t>(VirtualMemoryBytes() + 5 * kStack / 2);
  const rlimit limit{room, room};
  setrlimit(RLIMIT_AS, &limit);
  try {
    BatchLoader loader(ds, LoaderOptions{4, 64});
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::_Exit(e.code() == ExitCode::kFailure ? 0 : 1);
  }
  std::_Exit(1);
}

// The third thread cannot start: the loader joins the two it started and throws mgpu::Error
// naming --num-workers, where a joinable std::thread destroyed with the half-made loader would
// abort the process (std::terminate).
TEST(BatchLoaderDeathTest, AThreadTheSystemRefusesIsAnErrorNamingNumWorkers) {
  const ImageDataset ds = MakeDataset(8);
  EXPECT_EXIT(StartLoaderWithRoomForTwoThreads(ds), ::testing::ExitedWithCode(0),
              "cannot start loader thread [0-9]+ of 64 \\(--num-workers\\).*use fewer --num-workers");
}

}  // namespace
}  // namespace mgpu
