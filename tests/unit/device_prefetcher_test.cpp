// Specification of uint8 batches (BatchPixels::kRaw) and their normalization where they are
// used: a loader of raw pixels hands out the pixels the normalized loader normalizes, and the
// prefetcher turns them into the very same float32 values, per channel, whatever the thread count.
// (On a GPU the normalization runs after the copy; the CUDA build's GPU tests train through it.)
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "data/augment.h"
#include "data/batch_loader.h"
#include "data/device_prefetcher.h"
#include "data/image_dataset.h"

namespace mgpu {
namespace {

// Three channels with different statistics, every pixel value 0-255 present.
ImageDataset ColourDataset(int64_t n) {
  ImageDataset ds;
  ds.name = "colours";
  ds.images = torch::arange(n * 3 * 8 * 8, torch::kInt64).remainder(256).to(torch::kUInt8).view({n, 3, 8, 8});
  ds.labels = torch::arange(n, torch::kInt64).remainder(10);
  ds.class_names = std::vector<std::string>(10, "c");
  ds.mean = {0.485f, 0.456f, 0.406f};
  ds.stddev = {0.229f, 0.224f, 0.225f};
  return ds;
}

LoaderOptions Options(int workers, BatchPixels pixels, std::shared_ptr<const Augmentation> augmentation = nullptr) {
  LoaderOptions options{16, workers, 2, false, std::move(augmentation)};
  options.pixels = pixels;
  return options;
}

// An epoch of a BatchLoader or a BatchSource, in reverse index order.
template <typename Batches>
std::vector<Batch> Epoch(Batches& source, int64_t n, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.rbegin(), order.rend(), 0);
  source.StartEpoch(order, epoch);
  std::vector<Batch> batches;
  while (auto batch = source.Next()) batches.push_back(std::move(*batch));
  return batches;
}

TEST(RawBatches, HoldThePixelsTheNormalizedLoaderNormalizes) {
  const ImageDataset ds = ColourDataset(40);
  BatchLoader normalized(ds, Options(0, BatchPixels::kNormalized));
  BatchLoader raw(ds, Options(0, BatchPixels::kRaw));
  const std::vector<Batch> expected = Epoch(normalized, 40, 0);
  const std::vector<Batch> got = Epoch(raw, 40, 0);
  ASSERT_EQ(got.size(), expected.size());
  const PixelNormalization& n = raw.normalization();
  ASSERT_EQ(n.scale.size(), 3u);
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(got[b].images.scalar_type(), torch::kUInt8);
    EXPECT_TRUE(torch::equal(got[b].labels, expected[b].labels));
    // The samples' stored pixels (Epoch's order is 39, 38, ..., 0).
    const int64_t first = 39 - static_cast<int64_t>(b) * 16;
    const torch::Tensor samples = torch::arange(first, first - got[b].images.size(0), -1, torch::kInt64);
    EXPECT_TRUE(torch::equal(got[b].images, ds.images.index_select(0, samples))) << "batch " << b;
    // Each value v of channel c normalized by hand: v * (1 / (255 stddev)) + (-mean / stddev), in float32.
    for (int64_t c = 0; c < 3; ++c) {
      const torch::Tensor pixels = got[b].images.select(1, c).flatten();
      const torch::Tensor normalized_pixels = expected[b].images.select(1, c).flatten();
      for (int64_t k = 0; k < pixels.size(0); k += 7) {
        const float v = static_cast<float>(pixels[k].item<int64_t>());
        ASSERT_EQ(normalized_pixels[k].item<float>(), v * n.scale[c] + n.shift[c]) << "batch " << b << ", channel " << c;
      }
    }
  }
}

TEST(RawBatches, ThePrefetcherNormalizesThemToTheLoadersOwnBits) {
  const ImageDataset ds = ColourDataset(40);
  AugmentOptions rrc_flip;
  rrc_flip.kind = "rrc-flip";
  rrc_flip.resize = 6;
  rrc_flip.seed = 11;
  auto augmentation = std::make_shared<const Augmentation>(rrc_flip);
  for (int workers : {0, 2}) {
    BatchLoader normalized(ds, Options(workers, BatchPixels::kNormalized, augmentation));
    BatchLoader raw(ds, Options(workers, BatchPixels::kRaw, augmentation));
    DevicePrefetcher on_cpu(raw, torch::Device(torch::kCPU));
    for (int64_t epoch : {0, 1}) {
      const std::vector<Batch> expected = Epoch(normalized, 40, epoch);
      const std::vector<Batch> got = Epoch(on_cpu, 40, epoch);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t b = 0; b < got.size(); ++b) {
        ASSERT_EQ(got[b].images.scalar_type(), torch::kFloat32);
        EXPECT_TRUE(torch::equal(got[b].images, expected[b].images))
            << workers << " workers, epoch " << epoch << ", batch " << b << ": largest difference "
            << (got[b].images - expected[b].images).abs().max().item<float>();
        EXPECT_TRUE(torch::equal(got[b].labels, expected[b].labels));
      }
    }
  }
}

TEST(RawBatches, AreAQuarterOfTheBytes) {
  const ImageDataset ds = ColourDataset(16);
  BatchLoader normalized(ds, Options(0, BatchPixels::kNormalized));
  BatchLoader raw(ds, Options(0, BatchPixels::kRaw));
  const torch::Tensor f = Epoch(normalized, 16, 0)[0].images;
  const torch::Tensor u = Epoch(raw, 16, 0)[0].images;
  EXPECT_EQ(static_cast<int64_t>(f.nbytes()), 4 * static_cast<int64_t>(u.nbytes()));
}

}  // namespace
}  // namespace mgpu
