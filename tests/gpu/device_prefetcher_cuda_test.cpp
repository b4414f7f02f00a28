// The loader's uint8 batches normalized on a GPU (data/device_prefetcher.h): the same float32
// values as the loader's own normalization on the CPU, bit for bit, and on the device when
// Next() returns them. Skipped, saying so, without a CUDA device.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include <torch/torch.h>

#include "data/batch_loader.h"
#include "data/device_prefetcher.h"
#include "data/image_dataset.h"

namespace mgpu {
namespace {

TEST(DevicePrefetcherCuda, RawBatchesAreNormalizedOnTheDeviceToTheCpusBits) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  ImageDataset ds;
  ds.name = "colours";
  ds.images = torch::arange(100 * 3 * 16 * 16, torch::kInt64).remainder(256).to(torch::kUInt8).view({100, 3, 16, 16});
  ds.labels = torch::arange(100, torch::kInt64).remainder(10);
  ds.class_names = std::vector<std::string>(10, "c");
  ds.mean = {0.485f, 0.456f, 0.406f};
  ds.stddev = {0.229f, 0.224f, 0.225f};
  std::vector<int64_t> order(100);
  std::iota(order.rbegin(), order.rend(), 0);

  BatchLoader normalized(ds, LoaderOptions{32, 2, 2, false});
  LoaderOptions raw_options{32, 2, 2, true};
  raw_options.pixels = BatchPixels::kRaw;
  BatchLoader raw(ds, raw_options);
  DevicePrefetcher on_gpu(raw, torch::Device(torch::kCUDA, 0));
  for (int64_t epoch : {0, 1}) {
    normalized.StartEpoch(order, epoch);
    on_gpu.StartEpoch(order, epoch);
    int64_t batches = 0;
    while (auto expected = normalized.Next()) {
      auto got = on_gpu.Next();
      ASSERT_TRUE(got.has_value()) << "batch " << batches;
      ASSERT_TRUE(got->images.is_cuda());
      ASSERT_EQ(got->images.scalar_type(), torch::kFloat32);
      EXPECT_TRUE(torch::equal(got->images.cpu(), expected->images)) << "epoch " << epoch << ", batch " << batches;
      EXPECT_TRUE(torch::equal(got->labels.cpu(), expected->labels));
      ++batches;
    }
    EXPECT_FALSE(on_gpu.Next().has_value());
    EXPECT_EQ(batches, 4);
  }
}

}  // namespace
}  // namespace mgpu
