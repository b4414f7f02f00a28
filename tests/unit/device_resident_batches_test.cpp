// Specification of --data-on-device's batch source: the same batches as the host loader for
// the same index list (here on the CPU device, which runs the same tensor code as a GPU).
#include <gtest/gtest.h>

#include "data/batch_loader.h"
#include "data/device_resident_batches.h"
#include "data/image_dataset.h"

namespace mgpu {
namespace {

ImageDataset MakeColourDataset(int64_t n) {
  ImageDataset ds;
  ds.name = "colour-ramp";
  torch::manual_seed(7);
  ds.images = torch::randint(0, 256, {n, 3, 5, 4}, torch::kUInt8);
  ds.labels = torch::arange(n, torch::kInt64).remainder(10);
  ds.class_names = std::vector<std::string>(10, "c");
  ds.mean = {0.49f, 0.48f, 0.45f};
  ds.stddev = {0.25f, 0.24f, 0.26f};
  return ds;
}

TEST(DeviceResidentBatches, EqualTheHostLoadersBatchesIncludingTheShortLastOne) {
  const ImageDataset ds = MakeColourDataset(23);
  const std::vector<int64_t> order = {22, 3, 17, 0, 5, 9, 11, 1, 2, 21, 8, 13, 4, 6, 7, 10, 12, 14, 15, 16, 18, 19, 20};
  BatchLoader loader(ds, LoaderOptions{8, 0});
  DeviceResidentBatches resident(ds, 8, torch::kCPU, /*channels_last=*/false);
  loader.StartEpoch(order);
  resident.StartEpoch(order, 0);
  int batches = 0;
  while (auto expected = loader.Next()) {
    auto actual = resident.Next();
    ASSERT_TRUE(actual.has_value()) << "batch " << batches;
    EXPECT_EQ(actual->index, expected->index);
    ASSERT_EQ(actual->images.sizes(), expected->images.sizes());
    EXPECT_TRUE(torch::allclose(actual->images, expected->images, /*rtol=*/0, /*atol=*/1e-6)) << "batch " << batches;
    EXPECT_TRUE(torch::equal(actual->labels, expected->labels)) << "batch " << batches;
    ++batches;
  }
  EXPECT_EQ(batches, 3);
  EXPECT_FALSE(resident.Next().has_value()) << "the pass ends with the loader's";
  EXPECT_EQ(resident.device_bytes(), 23 * 3 * 5 * 4 + 23 * 8);
}

TEST(DeviceResidentBatches, ANewPassStartsOverAndAnUnstartedOneIsEmpty) {
  const ImageDataset ds = MakeColourDataset(6);
  DeviceResidentBatches resident(ds, 4, torch::kCPU, /*channels_last=*/false);
  EXPECT_FALSE(resident.Next().has_value());
  resident.StartEpoch({0, 1, 2, 3, 4, 5}, 0);
  ASSERT_TRUE(resident.Next().has_value());
  resident.StartEpoch({5, 4}, 1);
  auto batch = resident.Next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->labels.size(0), 2);
  EXPECT_EQ(batch->labels[0].item<int64_t>(), 5);
  EXPECT_FALSE(resident.Next().has_value());
  EXPECT_THROW(DeviceResidentBatches(ds, 0, torch::kCPU, false), std::invalid_argument);
}

// The graphed step gathers batches itself (--cuda-graphs --data-on-device): after DeferGather the
// source hands out each batch's sample indices only, and Gather of those indices is the batch
// Next() would have made, bit for bit the normalization BatchLoader's loop does (convert, then
// multiply, then add).
TEST(DeviceResidentBatches, DeferredBatchesAreIndicesWhoseGatherIsTheSameBatch) {
  const ImageDataset ds = MakeColourDataset(11);
  const std::vector<int64_t> order = {10, 3, 7, 0, 5, 9, 1, 2, 8, 4, 6};
  DeviceResidentBatches eager(ds, 4, torch::kCPU, /*channels_last=*/false);
  DeviceResidentBatches deferred(ds, 4, torch::kCPU, /*channels_last=*/false);
  deferred.DeferGather();
  eager.StartEpoch(order, 0);
  deferred.StartEpoch(order, 0);
  const torch::Tensor scale = torch::tensor({1.0f / (255.0f * 0.25f), 1.0f / (255.0f * 0.24f), 1.0f / (255.0f * 0.26f)})
                                  .reshape({1, 3, 1, 1});
  const torch::Tensor shift = torch::tensor({-0.49f / 0.25f, -0.48f / 0.24f, -0.45f / 0.26f}).reshape({1, 3, 1, 1});
  int batches = 0;
  while (auto expected = eager.Next()) {
    auto indices = deferred.Next();
    ASSERT_TRUE(indices.has_value()) << "batch " << batches;
    EXPECT_EQ(indices->index, expected->index);
    EXPECT_FALSE(indices->images.defined()) << "no gathering before the step";
    EXPECT_FALSE(indices->labels.defined());
    ASSERT_TRUE(indices->sample_indices.defined());
    EXPECT_EQ(indices->size(), expected->size());
    const Batch gathered = deferred.Gather(indices->sample_indices);
    EXPECT_TRUE(torch::equal(gathered.images, expected->images)) << "batch " << batches;
    EXPECT_TRUE(torch::equal(gathered.labels, expected->labels)) << "batch " << batches;
    const torch::Tensor by_steps =
        ds.images.index_select(0, indices->sample_indices).to(torch::kFloat32).mul_(scale).add_(shift);
    EXPECT_TRUE(torch::equal(gathered.images, by_steps)) << "batch " << batches;
    ++batches;
  }
  EXPECT_EQ(batches, 3);
  EXPECT_FALSE(deferred.Next().has_value());
}

// With --channels-last the batches come in the model's format, so the step converts nothing: the
// same values, laid out channels-last.
TEST(DeviceResidentBatches, ChannelsLastBatchesHoldTheSameValues) {
  const ImageDataset ds = MakeColourDataset(9);
  const std::vector<int64_t> order = {8, 1, 4, 4, 0, 7, 2, 3, 6};
  DeviceResidentBatches nchw(ds, 4, torch::kCPU, /*channels_last=*/false);
  DeviceResidentBatches channels_last(ds, 4, torch::kCPU, /*channels_last=*/true);
  nchw.StartEpoch(order, 0);
  channels_last.StartEpoch(order, 0);
  int batches = 0;
  while (auto expected = nchw.Next()) {
    auto actual = channels_last.Next();
    ASSERT_TRUE(actual.has_value()) << "batch " << batches;
    EXPECT_TRUE(actual->images.is_contiguous(torch::MemoryFormat::ChannelsLast)) << "batch " << batches;
    EXPECT_FALSE(actual->images.is_contiguous()) << "batch " << batches;
    EXPECT_TRUE(torch::equal(actual->images, expected->images)) << "batch " << batches;
    EXPECT_TRUE(torch::equal(actual->labels, expected->labels)) << "batch " << batches;
    ++batches;
  }
  EXPECT_EQ(batches, 3);
}

}  // namespace
}  // namespace mgpu
