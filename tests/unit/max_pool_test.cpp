// Specification of mgpu's max-pool arithmetic (models/kernels/max_pool_math.h), run on the CPU item
// by item as the CUDA kernels run it: ATen's max_pool2d_with_indices and its backward, bit for bit,
// for the windows the nets use and odd ones.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "models/kernels/max_pool_math.h"
#include "models/max_pool.h"

namespace mgpu {
namespace {

using kernels::FitsTheMaxPoolKernels;
using kernels::MaxPoolShape;

struct Window {
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

MaxPoolShape ShapeOf(const torch::Tensor& x, const Window& w) {
  MaxPoolShape s;
  s.batch = static_cast<int>(x.size(0)), s.channels = static_cast<int>(x.size(1));
  s.height = static_cast<int>(x.size(2)), s.width = static_cast<int>(x.size(3));
  s.kernel_h = w.kernel_h, s.kernel_w = w.kernel_w, s.stride_h = w.stride_h, s.stride_w = w.stride_w;
  s.pad_h = w.pad_h, s.pad_w = w.pad_w;
  s.pooled_height = kernels::MaxPoolOutputSide(s.height, s.kernel_h, s.stride_h, s.pad_h);
  s.pooled_width = kernels::MaxPoolOutputSide(s.width, s.kernel_w, s.stride_w, s.pad_w);
  return s;
}

// (N, C, H, W) as (N, H, W, C) rows, contiguous, on the CPU: the kernels' layout.
torch::Tensor Rows(const torch::Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous(); }

struct HostPool {
  torch::Tensor y, image_index, gx;  // (N, C, OH, OW), ATen's int64 index into H W; (N, C, H, W)
};

// The kernels' items on the host, for x of element type T (torch's kFloat or kBFloat16); gy2, a
// second consumer's gradient, or undefined.
template <typename T>
HostPool RunItems(const torch::Tensor& x, const torch::Tensor& gy, const torch::Tensor& gy2, const Window& w) {
  const MaxPoolShape s = ShapeOf(x, w);
  const torch::Tensor x_rows = Rows(x), gy_rows = Rows(gy), gy2_rows = gy2.defined() ? Rows(gy2) : torch::Tensor();
  torch::Tensor y_rows = torch::empty({s.batch, s.pooled_height, s.pooled_width, s.channels}, x.options());
  torch::Tensor gx_rows = torch::empty({s.batch, s.height, s.width, s.channels}, x.options());
  torch::Tensor where = torch::empty({s.forward_items() * kernels::kVector}, torch::kByte);
  const auto elements = [](const torch::Tensor& t) { return reinterpret_cast<T*>(t.data_ptr()); };
  for (int64_t i = 0; i < s.forward_items(); ++i) {
    kernels::MaxPoolForwardItem(s, i, elements(x_rows), elements(y_rows), where.data_ptr<uint8_t>());
  }
  for (int64_t i = 0; i < s.backward_items(); ++i) {
    kernels::MaxPoolBackwardItem(s, i, elements(gy_rows), gy2.defined() ? elements(gy2_rows) : nullptr,
                                 where.data_ptr<uint8_t>(), elements(gx_rows));
  }
  // The window index (dh kernel_w + dw) as ATen's index into the image, (h0 + dh) W + (w0 + dw).
  const auto index = where.to(torch::kLong).view({s.batch, s.pooled_height, s.pooled_width, s.channels});
  const auto oh = torch::arange(s.pooled_height).view({1, -1, 1, 1});
  const auto ow = torch::arange(s.pooled_width).view({1, 1, -1, 1});
  const auto h = oh * s.stride_h - s.pad_h + index.div(s.kernel_w, "floor");
  const auto w_in = ow * s.stride_w - s.pad_w + index.remainder(s.kernel_w);
  return {y_rows.permute({0, 3, 1, 2}), (h * s.width + w_in).permute({0, 3, 1, 2}), gx_rows.permute({0, 3, 1, 2})};
}

HostPool RunItems(const torch::Tensor& x, const torch::Tensor& gy, const Window& w,
                  const torch::Tensor& gy2 = torch::Tensor()) {
  return x.scalar_type() == torch::kBFloat16 ? RunItems<kernels::Bf16>(x, gy, gy2, w) : RunItems<float>(x, gy, gy2, w);
}

// ATen's max_pool2d_with_indices on the CPU and the gradient of (y gy).sum(), summed in float32
// (for bfloat16 from its exact values, rounded once at the end).
HostPool RunAten(const torch::Tensor& x, const torch::Tensor& gy, const Window& w) {
  const torch::Tensor x_float = x.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/true).requires_grad_();
  auto [y, index] = torch::max_pool2d_with_indices(x_float, {w.kernel_h, w.kernel_w}, {w.stride_h, w.stride_w},
                                                   {w.pad_h, w.pad_w});
  y.backward(gy.to(torch::kFloat));
  return {y.detach().to(x.scalar_type()), index, x_float.grad().to(x.scalar_type())};
}

void ExpectAtensBits(const torch::Tensor& x, const Window& w) {
  SCOPED_TRACE(::testing::Message() << x.sizes() << " " << x.scalar_type() << " kernel " << w.kernel_h << "x"
                                    << w.kernel_w << " stride " << w.stride_h << "x" << w.stride_w << " pad "
                                    << w.pad_h << "x" << w.pad_w);
  ASSERT_TRUE(FitsTheMaxPoolKernels(ShapeOf(x, w)));
  const MaxPoolShape s = ShapeOf(x, w);
  const torch::Tensor gy = torch::randn({s.batch, s.channels, s.pooled_height, s.pooled_width}).to(x.scalar_type());
  const HostPool ours = RunItems(x, gy, w), aten = RunAten(x, gy, w);
  EXPECT_TRUE(torch::equal(ours.y.isnan(), aten.y.isnan()));
  EXPECT_TRUE(torch::equal(ours.y.nan_to_num(0), aten.y.nan_to_num(0)));
  EXPECT_TRUE(torch::equal(ours.image_index, aten.image_index));
  EXPECT_TRUE(torch::equal(ours.gx, aten.gx)) << (ours.gx.to(torch::kFloat) - aten.gx.to(torch::kFloat)).abs().max();
}

constexpr Window kResNetStem{3, 3, 2, 2, 1, 1}, kVgg{2, 2, 2, 2, 0, 0}, kAlexNet{3, 3, 2, 2, 0, 0};

// A forked output's two gradients (MaxPoolForked): added as they are read, rounded to the element
// type, as ATen's autograd engine adds them before max_pool2d's backward.
TEST(MaxPoolArithmetic, AddsASecondConsumersGradientAsAutogradWould) {
  torch::manual_seed(23);
  for (const auto dtype : {torch::kBFloat16, torch::kFloat}) {
    const torch::Tensor x = torch::randn({2, 16, 13, 13}).to(dtype);
    const MaxPoolShape s = ShapeOf(x, kResNetStem);
    const auto sizes = std::vector<int64_t>{s.batch, s.channels, s.pooled_height, s.pooled_width};
    const torch::Tensor gy = torch::randn(sizes).to(dtype), gy2 = torch::randn(sizes).to(dtype);
    const HostPool ours = RunItems(x, gy, kResNetStem, gy2), aten = RunAten(x, gy + gy2, kResNetStem);
    EXPECT_TRUE(torch::equal(ours.gx, aten.gx)) << dtype << ": " << (ours.gx - aten.gx).abs().max();
    if (dtype == torch::kBFloat16) {  // the sum's rounding shows: leaving it out would fail the test
      const HostPool unrounded = RunAten(x, gy.to(torch::kFloat) + gy2.to(torch::kFloat), kResNetStem);
      EXPECT_FALSE(torch::equal(unrounded.gx, aten.gx));
    }
  }
}

TEST(MaxPoolArithmetic, IsAtensForTheNetsWindowsInBothTypes) {
  torch::manual_seed(3);
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    ExpectAtensBits(torch::randn({2, 16, 12, 12}).to(type), kResNetStem);
    ExpectAtensBits(torch::randn({2, 16, 12, 12}).to(type), kVgg);
    ExpectAtensBits(torch::randn({2, 16, 13, 13}).to(type), kAlexNet);
  }
}

TEST(MaxPoolArithmetic, IsAtensForOddSizesAndLopsidedWindows) {
  torch::manual_seed(4);
  ExpectAtensBits(torch::randn({3, 8, 9, 11}), kResNetStem);
  ExpectAtensBits(torch::randn({1, 24, 7, 5}), kVgg);  // the last row and column fall outside every window
  ExpectAtensBits(torch::randn({2, 8, 10, 9}), Window{3, 2, 2, 1, 1, 0});
  ExpectAtensBits(torch::randn({2, 8, 6, 6}), Window{3, 3, 1, 1, 1, 1});  // each pixel in up to nine windows
  ExpectAtensBits(torch::randn({1, 8, 20, 20}), Window{16, 16, 4, 4, 8, 8});
  ExpectAtensBits(torch::randn({1, 8, 1, 1}), Window{1, 1, 1, 1, 0, 0});
}

TEST(MaxPoolArithmetic, TakesTheFirstOfEqualMaximaAsAtenDoes) {
  // Whole numbers in a small range: many ties within a window, and gradients of every tie order.
  torch::manual_seed(5);
  ExpectAtensBits(torch::randint(0, 3, {2, 8, 11, 11}).to(torch::kFloat), kResNetStem);
  ExpectAtensBits(torch::ones({1, 8, 6, 6}, torch::kBFloat16), kAlexNet);
}

TEST(MaxPoolArithmetic, PropagatesNaNAndPointsAtTheLastNaN) {
  torch::manual_seed(6);
  torch::Tensor x = torch::randn({1, 8, 8, 8});
  x.index_put_({0, 0, 2, 2}, std::numeric_limits<float>::quiet_NaN());
  x.index_put_({0, 3, 2, 3}, std::numeric_limits<float>::quiet_NaN());
  x.index_put_({0, 3, 3, 3}, std::numeric_limits<float>::quiet_NaN());
  ExpectAtensBits(x, kResNetStem);
  ExpectAtensBits(x.to(torch::kBFloat16), kVgg);
}

TEST(MaxPoolArithmetic, AWindowOfMinusInfinityPointsAtItsFirstElement) {
  const float inf = std::numeric_limits<float>::infinity();
  torch::Tensor x = torch::full({1, 8, 5, 5}, -inf);
  x.index_put_({0, 1, 4, 4}, 2.f);
  ExpectAtensBits(x, kResNetStem);
  const HostPool ours = RunItems(x, torch::ones({1, 8, 3, 3}), kResNetStem);
  EXPECT_EQ(ours.image_index[0][0][1][1].item<int64_t>(), 6) << "the window at (1, 1) starts at (1, 1) of the image";
}

TEST(MaxPoolArithmetic, FitsOnlyWholeVectorsAByteOfWindowAndAtensPadding) {
  const torch::Tensor x = torch::zeros({2, 16, 12, 12});
  EXPECT_TRUE(FitsTheMaxPoolKernels(ShapeOf(x, kResNetStem)));
  EXPECT_FALSE(FitsTheMaxPoolKernels(ShapeOf(torch::zeros({2, 12, 12, 12}), kResNetStem)));  // C % 8
  EXPECT_TRUE(FitsTheMaxPoolKernels(ShapeOf(torch::zeros({1, 8, 40, 40}), Window{16, 16, 1, 1, 0, 0})));
  EXPECT_FALSE(FitsTheMaxPoolKernels(ShapeOf(torch::zeros({1, 8, 40, 40}), Window{16, 17, 1, 1, 0, 0})));
  EXPECT_FALSE(FitsTheMaxPoolKernels(ShapeOf(x, Window{3, 3, 2, 2, 2, 1})));  // ATen refuses pad > kernel / 2
  EXPECT_FALSE(FitsTheMaxPoolKernels(ShapeOf(torch::zeros({1, 8, 2, 2}), Window{3, 3, 1, 1, 0, 0})));  // no output
}

// The output's side, where the kernels allocate it and ATen would: 0 where ATen refuses the shape
// (no window fits, even with a stride that would round the count up to one).
TEST(MaxPoolArithmetic, SizesTheOutputAsAtenDoes) {
  for (int size = 1; size <= 12; ++size) {
    for (int kernel = 1; kernel <= 4; ++kernel) {
      for (int stride = 1; stride <= 3; ++stride) {
        for (int pad = 0; 2 * pad <= kernel; ++pad) {
          SCOPED_TRACE(::testing::Message() << "size " << size << " kernel " << kernel << " stride " << stride
                                            << " pad " << pad);
          int64_t aten = 0;
          try {
            aten = torch::max_pool2d(torch::zeros({1, 1, size, size}), kernel, stride, pad).size(-1);
          } catch (const c10::Error&) {
            aten = 0;  // "Output size is too small"
          }
          EXPECT_EQ(kernels::MaxPoolOutputSide(size, kernel, stride, pad), aten);
        }
      }
    }
  }
}

TEST(MaxPool, LeavesTheCpuToAten) {
  torch::nn::MaxPool2d pool(torch::nn::MaxPool2dOptions(3).stride(2).padding(1));
  const torch::Tensor x = torch::randn({2, 16, 9, 9}).contiguous(torch::MemoryFormat::ChannelsLast);
  EXPECT_FALSE(FusedMaxPoolApplies(x, *pool));
  EXPECT_TRUE(torch::equal(MaxPool(x, *pool), pool->forward(x)));
}

}  // namespace
}  // namespace mgpu
