// Specification of --data-on-device's batch gather arithmetic (data/kernels/gather_math.h), run on
// the CPU item by item: the same bits as ATen's index_select, mul and add_ (BatchLoader's
// normalization), in NCHW and channels-last, for samples that are and are not a whole number of
// items, and items that cross from one channel or pixel to the next. The GPU test
// (tests/gpu/batch_gather_cuda_test.cpp) holds the kernel to the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "data/batch_loader.h"
#include "data/kernels/gather_math.h"

namespace mgpu {
namespace {

struct GatherCase {
  int64_t samples, channels, height, width;
  std::vector<int64_t> indices;
};

// The host run of every item, as the kernel runs them.
torch::Tensor GatherByItems(const torch::Tensor& images, const std::vector<int64_t>& indices, const torch::Tensor& scale,
                            const torch::Tensor& shift, bool channels_last) {
  const kernels::GatherShape s{images.size(0), static_cast<int64_t>(indices.size()),
                               static_cast<int32_t>(images.size(1)), static_cast<int32_t>(images.size(2) * images.size(3)),
                               channels_last};
  torch::Tensor out = torch::empty({s.batch, s.channels, images.size(2), images.size(3)},
                                   torch::TensorOptions().memory_format(channels_last ? torch::MemoryFormat::ChannelsLast
                                                                                      : torch::MemoryFormat::Contiguous))
                          .fill_(std::numeric_limits<float>::quiet_NaN());  // an item that writes nothing shows
  for (int64_t position = 0; position < s.batch; ++position) {
    const uint8_t* image = images.data_ptr<uint8_t>() + indices[position] * s.sample_floats();
    for (int32_t item = 0; item < s.items_per_sample(); ++item) {
      const int32_t first = item * kernels::kGatherFloats;
      const kernels::GatherItemValues v =
          kernels::GatherItem(s, first, image, scale.data_ptr<float>(), shift.data_ptr<float>());
      for (int u = 0; u < v.count; ++u) out.data_ptr<float>()[position * s.sample_floats() + first + u] = v.values[u];
    }
  }
  return out;
}

void ExpectAtensBits(const GatherCase& c) {
  SCOPED_TRACE(::testing::Message() << c.samples << " x " << c.channels << " x " << c.height << " x " << c.width);
  torch::manual_seed(5);
  const torch::Tensor images = torch::randint(0, 256, {c.samples, c.channels, c.height, c.width}, torch::kUInt8);
  const std::vector<float> mean(c.channels, 0.4721f), stddev(c.channels, 0.2593f);
  const auto [scale, shift] = PixelNormalization::Of(mean, stddev).On(torch::kCPU);  // (1, C, 1, 1)
  const torch::Tensor aten = images.index_select(0, torch::tensor(c.indices)).mul(scale).add_(shift);
  for (const bool channels_last : {false, true}) {
    const torch::Tensor ours = GatherByItems(images, c.indices, scale.contiguous(), shift.contiguous(), channels_last);
    EXPECT_TRUE(ours.is_contiguous(channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous));
    EXPECT_TRUE(torch::equal(ours, aten)) << (channels_last ? "channels-last" : "NCHW") << ": "
                                          << (ours - aten).abs().nan_to_num(1e9).max().item<float>() << " apart";
  }
}

TEST(GatherArithmetic, IsAtensNormalizationInBothLayouts) {
  ExpectAtensBits({6, 3, 8, 8, {5, 0, 3, 3}});     // whole items, a sample twice
  ExpectAtensBits({4, 1, 28, 28, {2, 1}});         // MNIST's shape
  ExpectAtensBits({3, 3, 5, 3, {2, 0, 1}});        // 45 floats a sample: a last item of 1
  ExpectAtensBits({2, 3, 1, 1, {1, 1, 0}});        // one pixel: an item of 3 floats
  ExpectAtensBits({5, 2, 7, 9, {4, 2, 0, 1, 3}});  // 126 floats: items across the channels' seam
  ExpectAtensBits({3, 5, 3, 3, {2, 1, 0}});        // 45 floats, items across pixels' seams both ways
}

// Every pixel value through the arithmetic, against ATen's two roundings and against the one
// rounding of a fused multiply-add, which differs for some: the test can tell them apart.
TEST(GatherArithmetic, RoundsTheMultiplyAndTheAddApart) {
  const float scale = 1.0f / (255.0f * 0.2593f), shift = -0.4721f / 0.2593f;
  int fused_differs = 0;
  for (int v = 0; v < 256; ++v) {
    const float expected =
        torch::tensor({static_cast<uint8_t>(v)}).mul(torch::tensor({scale})).add_(torch::tensor({shift})).item<float>();
    EXPECT_EQ(kernels::NormalizedPixel(static_cast<uint8_t>(v), scale, shift), expected) << "pixel " << v;
    fused_differs += std::fma(static_cast<float>(v), scale, shift) != expected;
  }
  EXPECT_GT(fused_differs, 0) << "the constants should tell a fused multiply-add from two roundings";
}

}  // namespace
}  // namespace mgpu
