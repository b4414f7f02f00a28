// Specification of the fused batch norm's arithmetic (models/kernels/batch_norm_math.h), run on the
// CPU as the CUDA kernels run it: the output, every gradient and the running statistics of ATen's
// training-mode relu(batch_norm(x) + residual), computed in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <vector>

#include "models/batch_norm_act.h"
#include "tests/support/batch_norm_on_host.h"

namespace mgpu {
namespace {

using kernels::FitsTheBatchNormKernels;
using kernels::kBnMinRowsPerSplit;
using kernels::MakeBatchNormShape;
using testing::HostBatchNorm;
using testing::RunBatchNormOnHost;

constexpr double kEps = 1e-5, kMomentum = 0.1;

struct Case {
  torch::Tensor x, residual, gamma, beta, running_mean, running_var, gy;  // residual: undefined for none
  bool relu;
};

// A random batch norm of (rows, channels) in `type`: channels of their own mean and spread, gamma
// around one (a few negative), running statistics away from the batch's.
Case RandomCase(int64_t rows, int64_t channels, torch::ScalarType type, bool relu, bool residual) {
  torch::manual_seed(7);
  Case c;
  c.x = (torch::randn({rows, channels}) * (0.5 + torch::rand({channels})) + torch::randn({channels})).to(type);
  if (residual) c.residual = torch::randn({rows, channels}).to(type);
  c.gamma = 1 + 0.5 * torch::randn({channels}), c.beta = 0.2 * torch::randn({channels});
  c.running_mean = 0.1 * torch::randn({channels}), c.running_var = 0.5 + torch::rand({channels});
  c.gy = torch::randn({rows, channels}).to(type);
  c.relu = relu;
  return c;
}

HostBatchNorm RunOnHost(const Case& c) {
  return RunBatchNormOnHost(c.x, c.residual, c.gamma, c.beta, c.running_mean, c.running_var, kEps, kMomentum, c.relu,
                            c.gy);
}

// ATen's training-mode batch norm, add and relu in double, from the case's values (bfloat16's
// exactly): output, gradients of (y gy).sum() and the updated running statistics.
struct Reference {
  torch::Tensor y, gx, gresidual, ggamma, gbeta, running_mean, running_var;
};

Reference RunAten(const Case& c) {
  const auto x = c.x.to(torch::kDouble).requires_grad_(), gamma = c.gamma.to(torch::kDouble).requires_grad_();
  const auto beta = c.beta.to(torch::kDouble).requires_grad_();
  Reference r{{}, {}, {}, {}, {}, c.running_mean.to(torch::kDouble), c.running_var.to(torch::kDouble)};
  torch::Tensor y = torch::batch_norm(x, gamma, beta, r.running_mean, r.running_var, /*training=*/true, kMomentum,
                                      kEps, /*cudnn_enabled=*/false);
  torch::Tensor residual;
  if (c.residual.defined()) residual = c.residual.to(torch::kDouble).requires_grad_(), y = y + residual;
  if (c.relu) y = torch::relu(y);
  (y * c.gy.to(torch::kDouble)).sum().backward();
  r.y = y.detach(), r.gx = x.grad(), r.ggamma = gamma.grad(), r.gbeta = beta.grad();
  if (residual.defined()) r.gresidual = residual.grad();
  return r;
}

// |ours - reference| within `tolerance` of the reference's largest magnitude (or of one, if all
// are smaller), element by element; NaN exactly where the reference has NaN.
void ExpectClose(const torch::Tensor& ours, const torch::Tensor& reference, double tolerance, const char* what) {
  const torch::Tensor theirs = ours.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(theirs.isnan(), reference.isnan()))
      << what << ": " << theirs.isnan().sum().item<int64_t>() << " NaNs, ATen's "
      << reference.isnan().sum().item<int64_t>();
  const torch::Tensor error = (theirs - reference).abs().nan_to_num(0.0);
  const double bound = tolerance * std::max(1.0, reference.abs().nan_to_num(0.0).max().item<double>());
  EXPECT_LE(error.max().item<double>(), bound) << what;
}

// The elements' tolerance: float32's arithmetic, or bfloat16's rounding of the result (2^-8).
double ElementTolerance(const Case& c) { return c.x.scalar_type() == torch::kBFloat16 ? 1e-2 : 1e-4; }

void ExpectAtensBatchNorm(const Case& c, const HostBatchNorm& ours) {
  SCOPED_TRACE(::testing::Message() << c.x.sizes() << " " << c.x.scalar_type() << (c.relu ? " relu" : "")
                                    << (c.residual.defined() ? " residual" : ""));
  const Reference aten = RunAten(c);
  ExpectClose(ours.y, aten.y, ElementTolerance(c), "y");
  ExpectClose(ours.gx, aten.gx, ElementTolerance(c), "gx");
  ASSERT_EQ(ours.gresidual.defined(), c.residual.defined());
  if (c.residual.defined()) ExpectClose(ours.gresidual, aten.gresidual, ElementTolerance(c), "gresidual");
  // Float32 sums of the elements as they are (bfloat16's exactly), so float32's tolerance.
  ExpectClose(ours.ggamma, aten.ggamma, 1e-4, "ggamma");
  ExpectClose(ours.gbeta, aten.gbeta, 1e-4, "gbeta");
  ExpectClose(ours.running_mean, aten.running_mean, 1e-5, "running_mean");
  ExpectClose(ours.running_var, aten.running_var, 1e-5, "running_var");
}

void ExpectAtensBatchNormWithAndWithoutReluAndResidual(int64_t rows, int64_t channels, torch::ScalarType type) {
  for (const bool relu : {false, true}) {
    for (const bool residual : {false, true}) {
      const Case c = RandomCase(rows, channels, type, relu, residual);
      ExpectAtensBatchNorm(c, RunOnHost(c));
    }
  }
}

TEST(BatchNormArithmetic, IsAtensBatchNormAddAndReluInFloat32) {
  ExpectAtensBatchNormWithAndWithoutReluAndResidual(300, 64, torch::kFloat);
}

TEST(BatchNormArithmetic, IsAtensBatchNormAddAndReluInBfloat16WithinItsRounding) {
  ExpectAtensBatchNormWithAndWithoutReluAndResidual(300, 64, torch::kBFloat16);
}

TEST(BatchNormArithmetic, TakesChannelsThatFillNoTile) {
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    for (const int64_t channels : {72, 8, 200}) {  // a tile and a vector, one vector, three tiles and a half
      const Case c = RandomCase(150, channels, type, /*relu=*/true, /*residual=*/true);
      ExpectAtensBatchNorm(c, RunOnHost(c));
    }
  }
}

TEST(BatchNormArithmetic, TakesTwoRowsAndRowsThatFillNoLane) {
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    for (const int64_t rows : {2, 33}) {
      const Case c = RandomCase(rows, 16, type, /*relu=*/true, /*residual=*/true);
      ExpectAtensBatchNorm(c, RunOnHost(c));
    }
  }
}

TEST(BatchNormArithmetic, SumsManyRowsInManySplits) {
  EXPECT_GT(MakeBatchNormShape(5000, 64).splits, 1);
  const Case few = RandomCase(5000, 64, torch::kFloat, /*relu=*/true, /*residual=*/true);
  ExpectAtensBatchNorm(few, RunOnHost(few));
  EXPECT_GT(MakeBatchNormShape(20000, 128).splits, 32) << "more splits than a finalize warp has lanes";
  const Case many = RandomCase(20000, 128, torch::kBFloat16, /*relu=*/true, /*residual=*/false);
  ExpectAtensBatchNorm(many, RunOnHost(many));
}

// num_batches_tracked counts the batch in the forward's finalize, once for all the tiles' channels
// (channel 0's), as BatchNorm2d's forward adds one.
TEST(BatchNormArithmetic, CountsTheBatchOnce) {
  for (const int64_t channels : {8, 64, 200}) {
    EXPECT_EQ(RunOnHost(RandomCase(300, channels, torch::kFloat, /*relu=*/true, /*residual=*/false)).batches_tracked, 1)
        << channels << " channels";
  }
}

// Statistics of x - x[0] keep the variance's digits that sums of x and x^2 would cancel: at a
// mean of 1000 and a variance of 1, float32's x^2 has no digit left below 0.06.
// ConvBatchNormAct's folded bias: bn(x + b) computed from x, b only moving the running mean; the
// output and every other gradient are bn(x + b)'s, and b's gradient, sum of gx, is exactly zero.
TEST(BatchNormArithmetic, FoldsAnInputBiasIntoTheRunningMeanAlone) {
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    Case c = RandomCase(500, 72, type, /*relu=*/true, /*residual=*/false);
    const torch::Tensor bias = 3 * torch::randn({72});
    const HostBatchNorm ours = RunBatchNormOnHost(c.x, {}, c.gamma, c.beta, c.running_mean, c.running_var, kEps,
                                                  kMomentum, c.relu, c.gy, bias);
    const double tolerance = ElementTolerance(c);
    c.x = c.x.to(torch::kDouble) + bias.to(torch::kDouble);  // the reference's input, exactly
    const Reference aten = RunAten(c);
    ExpectClose(ours.y, aten.y, tolerance, "y");
    ExpectClose(ours.gx, aten.gx, tolerance, "gx");
    ExpectClose(ours.ggamma, aten.ggamma, 1e-4, "ggamma");
    ExpectClose(ours.gbeta, aten.gbeta, 1e-4, "gbeta");
    ExpectClose(ours.running_mean, aten.running_mean, 1e-5, "running_mean");
    ExpectClose(ours.running_var, aten.running_var, 1e-5, "running_var");
    EXPECT_GT((ours.running_mean - c.running_mean).abs().max().item<double>(), 0.1) << "the bias moved it";
  }
}

TEST(BatchNormArithmetic, KeepsTheVarianceOfAMeanFarFromZero) {
  Case c = RandomCase(4000, 64, torch::kFloat, /*relu=*/false, /*residual=*/false);
  c.x = 1000 + torch::randn({4000, 64});
  const HostBatchNorm ours = RunOnHost(c);
  const torch::Tensor variance = c.x.to(torch::kDouble).var(0, /*unbiased=*/false);
  ExpectClose(ours.invstd, 1 / (variance + kEps).sqrt(), 1e-3, "invstd");
  const Reference aten = RunAten(c);
  ExpectClose(ours.running_var, aten.running_var, 1e-3, "running_var");
  ExpectClose(ours.y, aten.y, 1e-3, "y");
  ExpectClose(ours.gx, aten.gx, 1e-3, "gx");
  ExpectClose(ours.ggamma, aten.ggamma, 1e-3, "ggamma");
}

TEST(BatchNormArithmetic, AReluClosedForAWholeChannelPassesItNoGradient) {
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    Case c = RandomCase(100, 16, type, /*relu=*/true, /*residual=*/true);
    c.beta[5] = -100.0;  // bn's output near -100 for every row; the residual does not lift it
    const HostBatchNorm ours = RunOnHost(c);
    const auto channel = [](const torch::Tensor& t) { return t.select(1, 5); };
    EXPECT_TRUE(torch::equal(channel(ours.y), torch::zeros_like(channel(ours.y))));
    EXPECT_TRUE(torch::equal(channel(ours.gx), torch::zeros_like(channel(ours.gx))));
    EXPECT_TRUE(torch::equal(channel(ours.gresidual), torch::zeros_like(channel(ours.gresidual))));
    EXPECT_EQ(ours.ggamma[5].item<float>(), 0.f);
    EXPECT_EQ(ours.gbeta[5].item<float>(), 0.f);
    ExpectAtensBatchNorm(c, ours);
  }
}

// ATen's NaNs: bn's output, gx and the statistics NaN for the whole channel, the other channels
// untouched; relu passes NaN forward and, backward, the gradient where y is NaN (not <= 0).
TEST(BatchNormArithmetic, ANanInTheInputReachesItsChannelsOutputsAsInAten) {
  for (const bool relu : {false, true}) {
    Case c = RandomCase(50, 16, torch::kFloat, relu, /*residual=*/true);
    c.x[20][3] = NAN;
    const HostBatchNorm ours = RunOnHost(c);
    EXPECT_TRUE(ours.y.select(1, 3).isnan().all().item<bool>());
    EXPECT_TRUE(ours.gx.select(1, 3).isnan().all().item<bool>());
    ExpectAtensBatchNorm(c, ours);
  }
}

// A y that two consumers read (a ResNet block's output) gets two gradients. The backward adds them
// as it loads them, rounded to the element type as ATen's add of the two rounds them, then runs as
// if given that sum: the same bits as the sum passed alone, so ATen's batch norm of the sum.
TEST(BatchNormArithmetic, AddsTwoConsumersGradientsAsAtensAddRoundsThem) {
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    for (const bool relu : {false, true}) {
      for (const bool residual : {false, true}) {
        Case c = RandomCase(300, 72, type, relu, residual);
        const torch::Tensor gy2 = torch::randn_like(c.gy, torch::kFloat).to(type);
        const HostBatchNorm two = RunBatchNormOnHost(c.x, c.residual, c.gamma, c.beta, c.running_mean,
                                                     c.running_var, kEps, kMomentum, c.relu, c.gy, {}, gy2);
        c.gy = (c.gy.to(torch::kFloat) + gy2.to(torch::kFloat)).to(type);  // ATen's add: float32, rounded once
        const HostBatchNorm summed = RunOnHost(c);
        SCOPED_TRACE(::testing::Message() << type << (relu ? " relu" : "") << (residual ? " residual" : ""));
        EXPECT_TRUE(torch::equal(two.gx, summed.gx));
        if (residual) {
          EXPECT_TRUE(torch::equal(two.gresidual, summed.gresidual));
        }
        EXPECT_TRUE(torch::equal(two.ggamma, summed.ggamma));
        EXPECT_TRUE(torch::equal(two.gbeta, summed.gbeta));
        ExpectAtensBatchNorm(c, two);
      }
    }
  }
}

// The split decides the order of every sum, so the results' bits: a function of the shape alone,
// pinned here so that a change to it is a deliberate one.
TEST(BatchNormArithmetic, SplitsTheRowsByTheShapeAlone) {
  for (const int64_t rows : {2, 127, 128, 129, 5000, 20000, 100003, 50 * 1000 * 1000}) {
    for (const int channels : {8, 64, 72, 512, 2048}) {
      const auto s = MakeBatchNormShape(rows, channels);
      SCOPED_TRACE(::testing::Message() << rows << " x " << channels);
      EXPECT_GE(s.splits, 1);
      EXPECT_LE(s.splits, (rows + kBnMinRowsPerSplit - 1) / kBnMinRowsPerSplit) << "splits of too few rows";
      EXPECT_GE(s.splits * s.rows_per_split, rows);
      EXPECT_LT(s.split_begin(s.splits - 1), rows) << "an empty last split";
      EXPECT_EQ(s.split_end(s.splits - 1), rows);
    }
  }
  const auto resnet_layer1 = MakeBatchNormShape(64 * 32 * 32, 64);  // CIFAR's ResNet at batch 64
  EXPECT_EQ(resnet_layer1.splits, 264);
  EXPECT_EQ(resnet_layer1.rows_per_split, 249);
  const auto two_tiles = MakeBatchNormShape(20000, 128);
  EXPECT_EQ(two_tiles.splits, 132);
  EXPECT_EQ(two_tiles.rows_per_split, 152);
  const auto wide = MakeBatchNormShape(64 * 4 * 4, 512);  // layer4's 8 tiles, in splits of the fewest rows
  EXPECT_EQ(wide.splits, 8);
  EXPECT_EQ(wide.rows_per_split, 128);
}

// Where relu had no residual, the backward masks the gradient by comparing z = x scale + shift
// with a threshold instead of rounding relu(z) to the element type: the same mask for every z, the
// float32 denormals that round to a bfloat16 zero (bits <= 0x8000), the tie and NaN among them.
template <typename T>
void ExpectTheRecomputedMaskIsTheRoundedOutputs() {
  float mean[kernels::kBnVector] = {}, scale[kernels::kBnVector], shift[kernels::kBnVector] = {};
  std::fill(std::begin(scale), std::end(scale), 1.f);
  const kernels::BatchNormStatistics st{mean, nullptr, scale, shift};
  const kernels::GradientItemChannels channels(st, /*recomputes=*/true, 0);
  std::vector<uint32_t> bits = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x3f800000u, 0x00800000u};
  for (uint32_t b = 0; b <= 0x18000u; b += 0x7fu) bits.push_back(b), bits.push_back(b | 0x80000000u);
  for (const uint32_t b : {0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x10000u, 0x17fffu, 0x18000u}) {
    bits.push_back(b), bits.push_back(b | 0x80000000u);
  }
  for (const uint32_t b : bits) {
    const float z = kernels::BitsToFloat(b);
    const float y = kernels::RoundedTo<T>(kernels::Relu(z));
    EXPECT_EQ(channels.Passed<T>(1.f, z, 0.f, /*relu=*/true, 0), kernels::PassedGradient(1.f, y, true))
        << std::hex << "z bits 0x" << b;
  }
}

TEST(BatchNormArithmetic, MasksTheRecomputedReluAsItsRoundedOutput) {
  ExpectTheRecomputedMaskIsTheRoundedOutputs<kernels::Bf16>();
  ExpectTheRecomputedMaskIsTheRoundedOutputs<float>();
}

TEST(BatchNormArithmetic, TakesMoreThanOneRowAndWholeVectorsOfChannels) {
  EXPECT_TRUE(FitsTheBatchNormKernels(2, 8));
  EXPECT_TRUE(FitsTheBatchNormKernels(64 * 32 * 32, 72));
  EXPECT_FALSE(FitsTheBatchNormKernels(1, 64)) << "one value a channel: no variance (ATen refuses it)";
  EXPECT_FALSE(FitsTheBatchNormKernels(0, 64));
  EXPECT_FALSE(FitsTheBatchNormKernels(100, 12)) << "not a whole vector of channels";
  EXPECT_FALSE(FitsTheBatchNormKernels(100, 3));
  EXPECT_FALSE(FitsTheBatchNormKernels(100, 0));
}

TEST(BatchNormAct, LeavesTheCpuToAten) {
  torch::manual_seed(2);
  torch::nn::BatchNorm2d ours(16), atens(16);
  {
    torch::NoGradGuard no_grad;
    ours->weight.uniform_(0.5, 1.5), ours->bias.uniform_(-0.5, 0.5);
    atens->weight.copy_(ours->weight), atens->bias.copy_(ours->bias);
  }
  const torch::Tensor x = torch::randn({4, 16, 5, 5}).requires_grad_(), residual = torch::randn({4, 16, 5, 5});
  EXPECT_FALSE(FusedBatchNormApplies(x, *ours, residual));
  const torch::Tensor y = BatchNormAct(x, *ours, residual, Activation::kRelu);
  const torch::Tensor x_aten = x.detach().clone().requires_grad_();
  const torch::Tensor y_aten = torch::relu(atens->forward(x_aten) + residual);
  EXPECT_TRUE(torch::equal(y, y_aten));
  const torch::Tensor gy = torch::randn_like(y);
  y.backward(gy), y_aten.backward(gy);
  EXPECT_TRUE(torch::equal(x.grad(), x_aten.grad()));
  EXPECT_TRUE(torch::equal(ours->weight.grad(), atens->weight.grad()));
  EXPECT_TRUE(torch::equal(ours->bias.grad(), atens->bias.grad()));
  EXPECT_TRUE(torch::equal(ours->running_mean, atens->running_mean));
  EXPECT_TRUE(torch::equal(ours->running_var, atens->running_var));
  EXPECT_EQ(ours->num_batches_tracked.item<int64_t>(), 1);
}

// On the CPU a conv keeps its bias: ConvBatchNormAct is conv, batch norm and relu as before, bit for bit.
TEST(BatchNormAct, ConvBatchNormActLeavesTheCpuToAten) {
  torch::manual_seed(4);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 16, 3).padding(1));
  torch::nn::BatchNorm2d ours(16), atens(16);
  auto atens_conv = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(conv->clone());
  const torch::Tensor x = torch::randn({4, 3, 6, 6});
  const torch::Tensor y = ConvBatchNormAct(x, *conv, *ours, Activation::kRelu);
  const torch::Tensor y_aten = torch::relu(atens->forward(atens_conv->forward(x)));
  EXPECT_TRUE(torch::equal(y, y_aten));
  const torch::Tensor gy = torch::randn_like(y);
  y.backward(gy), y_aten.backward(gy);
  EXPECT_TRUE(torch::equal(conv->bias.grad(), atens_conv->bias.grad())) << "ATen's bias gradient, not zeros";
  EXPECT_TRUE(torch::equal(conv->weight.grad(), atens_conv->weight.grad()));
  EXPECT_TRUE(torch::equal(ours->running_mean, atens->running_mean));
}

}  // namespace
}  // namespace mgpu
