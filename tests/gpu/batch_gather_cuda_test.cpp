// --data-on-device's batch gather on a GPU (data/kernels/gather_kernels.h): the CPU's batches
// (ATen's index_select, mul and add_) bit for bit, in both layouts, deferred or not. Skipped,
// saying so, on machines without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include <torch/torch.h>

#include "data/device_resident_batches.h"
#include "data/image_dataset.h"

namespace mgpu {
namespace {

class BatchGatherCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  }
};

ImageDataset MakeDataset(int64_t n, int64_t channels, int64_t height, int64_t width) {
  ImageDataset ds;
  ds.name = "random-pixels";
  ds.images = torch::randint(0, 256, {n, channels, height, width}, torch::kUInt8);
  ds.labels = torch::arange(n, torch::kInt64).remainder(10);
  ds.class_names = std::vector<std::string>(10, "c");
  for (int64_t c = 0; c < channels; ++c) {
    ds.mean.push_back(0.41f + 0.03f * static_cast<float>(c));
    ds.stddev.push_back(0.22f + 0.02f * static_cast<float>(c));
  }
  return ds;
}

void ExpectTheCpusBatches(const ImageDataset& ds, int64_t batch_size, bool channels_last) {
  SCOPED_TRACE(::testing::Message() << ds.images.sizes() << " batch " << batch_size
                                    << (channels_last ? " channels-last" : " NCHW"));
  std::vector<int64_t> order(static_cast<size_t>(ds.size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>((i * 7 + 3) % order.size());
  DeviceResidentBatches cpu(ds, batch_size, torch::kCPU, channels_last);
  DeviceResidentBatches gpu(ds, batch_size, torch::kCUDA, channels_last);
  DeviceResidentBatches deferred(ds, batch_size, torch::kCUDA, channels_last);
  deferred.DeferGather();
  cpu.StartEpoch(order, 0);
  gpu.StartEpoch(order, 0);
  deferred.StartEpoch(order, 0);
  int batches = 0;
  while (auto expected = cpu.Next()) {
    const auto actual = gpu.Next();
    const auto indices = deferred.Next();
    ASSERT_TRUE(actual.has_value() && indices.has_value()) << "batch " << batches;
    const Batch gathered = deferred.Gather(indices->sample_indices);
    for (const Batch* batch : {&*actual, &gathered}) {
      EXPECT_TRUE(batch->images.is_cuda());
      EXPECT_TRUE(batch->images.is_contiguous(channels_last ? torch::MemoryFormat::ChannelsLast
                                                            : torch::MemoryFormat::Contiguous));
      EXPECT_TRUE(torch::equal(batch->images.cpu(), expected->images)) << "batch " << batches;
      EXPECT_TRUE(torch::equal(batch->labels.cpu(), expected->labels)) << "batch " << batches;
    }
    ++batches;
  }
  EXPECT_EQ(batches, (ds.size() + batch_size - 1) / batch_size);
}

TEST_F(BatchGatherCuda, IsTheCpusBatchesInBothLayouts) {
  torch::manual_seed(3);
  for (const bool channels_last : {false, true}) {
    ExpectTheCpusBatches(MakeDataset(40, 3, 32, 32), 16, channels_last);   // CIFAR-10's shape, a short last batch
    ExpectTheCpusBatches(MakeDataset(9, 1, 28, 28), 4, channels_last);     // MNIST's
    ExpectTheCpusBatches(MakeDataset(6, 3, 224, 224), 4, channels_last);   // ImageNet's
    ExpectTheCpusBatches(MakeDataset(7, 3, 5, 3), 3, channels_last);       // 15 pixels: a part-filled item
    ExpectTheCpusBatches(MakeDataset(5, 4, 1, 1), 2, channels_last);       // one pixel
  }
}

}  // namespace
}  // namespace mgpu
