// mgpu's fused batch norm (models/batch_norm_act.h) on a GPU: the same bits as its arithmetic run on
// the CPU (whose agreement with ATen the unit tests check), only where it applies, and ResNet-18
// trained with it as with ATen's kernels. Skipped, saying so, on machines without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include "amp/autocast.h"
#include "models/batch_norm_act.h"
#include "models/fused_kernels.h"
#include "models/memory_format.h"
#include "models/resnet.h"
#include "tests/support/batch_norm_on_host.h"

namespace mgpu {
namespace {

using testing::RunBatchNormOnHost;

class BatchNormActCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  }
};

// A (N, C, H, W) tensor as the kernels' (M, C) rows, on the CPU.
torch::Tensor Rows(const torch::Tensor& t) {
  return t.cpu().permute({0, 2, 3, 1}).reshape({-1, t.size(1)}).contiguous();
}

torch::Tensor ChannelsLastOnCuda(const torch::Tensor& t) {
  return t.to(torch::kCUDA).contiguous(torch::MemoryFormat::ChannelsLast);
}

struct ActivationSize {
  int64_t batch, channels, height, width;
};

// BatchNormAct (or, `forked`, BatchNormActForked with a gradient from each reader) on the GPU
// against RunBatchNormOnHost: output, gradients and running statistics, bit for bit.
void ExpectTheHostsBits(const ActivationSize& size, torch::ScalarType type, bool relu, bool with_residual,
                        bool forked = false) {
  SCOPED_TRACE(::testing::Message() << size.batch << "x" << size.channels << "x" << size.height << "x" << size.width
                                    << " " << type << (relu ? " relu" : "") << (with_residual ? " residual" : "")
                                    << (forked ? " forked" : ""));
  torch::manual_seed(8);
  torch::nn::BatchNorm2d bn(size.channels);
  {
    torch::NoGradGuard no_grad;
    bn->weight.uniform_(0.5, 1.5), bn->bias.uniform_(-0.5, 0.5);
    bn->running_mean.normal_(0, 0.1), bn->running_var.uniform_(0.5, 1.5);
  }
  const std::vector<int64_t> shape = {size.batch, size.channels, size.height, size.width};
  const torch::Tensor x = (torch::randn(shape) * 2 + 0.5).to(type), gy = torch::randn(shape).to(type);
  const torch::Tensor residual = with_residual ? torch::randn(shape).to(type) : torch::Tensor();
  const torch::Tensor gy2 = forked ? torch::randn(shape).to(type) : torch::Tensor();
  const auto host = RunBatchNormOnHost(Rows(x), with_residual ? Rows(residual) : torch::Tensor(), bn->weight.detach(),
                                       bn->bias.detach(), bn->running_mean, bn->running_var, bn->options.eps(),
                                       *bn->options.momentum(), relu, Rows(gy), {},
                                       forked ? Rows(gy2) : torch::Tensor());
  bn->to(torch::kCUDA);
  const torch::Tensor x_cuda = ChannelsLastOnCuda(x).requires_grad_();
  const torch::Tensor residual_cuda = with_residual ? ChannelsLastOnCuda(residual).requires_grad_() : torch::Tensor();
  ASSERT_TRUE(FusedBatchNormApplies(x_cuda, *bn, residual_cuda));
  const Activation act = relu ? Activation::kRelu : Activation::kNone;
  torch::Tensor y;
  if (forked) {
    const ForkedActivation both = BatchNormActForked(x_cuda, *bn, residual_cuda, act);
    EXPECT_EQ(both.first.data_ptr(), both.second.data_ptr()) << "one storage";
    torch::autograd::backward({both.first, both.second}, {ChannelsLastOnCuda(gy), ChannelsLastOnCuda(gy2)});
    y = both.first;
  } else {
    y = BatchNormAct(x_cuda, *bn, residual_cuda, act);
    y.backward(ChannelsLastOnCuda(gy));
  }
  const auto expect_equal = [](const torch::Tensor& ours, const torch::Tensor& host, const char* what) {
    EXPECT_TRUE(torch::equal(ours, host))
        << what << ": " << (ours.to(torch::kFloat) - host.to(torch::kFloat)).abs().max().item<float>() << " apart";
  };
  expect_equal(Rows(y), host.y, "y");
  expect_equal(Rows(x_cuda.grad()), host.gx, "gx");
  if (with_residual) expect_equal(Rows(residual_cuda.grad()), host.gresidual, "gresidual");
  expect_equal(bn->weight.grad().cpu(), host.ggamma, "ggamma");
  expect_equal(bn->bias.grad().cpu(), host.gbeta, "gbeta");
  expect_equal(bn->running_mean.cpu(), host.running_mean, "running_mean");
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), host.batches_tracked);
  expect_equal(bn->running_var.cpu(), host.running_var, "running_var");
}

TEST_F(BatchNormActCuda, ComputesTheBitsOfItsArithmeticOnTheCpu) {
  for (const auto type : {torch::kBFloat16, torch::kFloat}) {
    for (const bool relu : {false, true}) {
      for (const bool residual : {false, true}) ExpectTheHostsBits({8, 64, 16, 16}, type, relu, residual);  // 16 splits
    }
    ExpectTheHostsBits({4, 72, 10, 10}, type, /*relu=*/true, /*with_residual=*/true);  // a tile and a vector
    ExpectTheHostsBits({2, 256, 7, 7}, type, /*relu=*/true, /*with_residual=*/false);  // four tiles, one split
    ExpectTheHostsBits({64, 128, 32, 32}, type, /*relu=*/true, /*with_residual=*/true);  // 132 splits a tile
  }
}

TEST_F(BatchNormActCuda, AddsTheGradientsOfAForkedOutputsTwoReaders) {
  for (const auto type : {torch::kBFloat16, torch::kFloat}) {
    ExpectTheHostsBits({8, 64, 16, 16}, type, /*relu=*/true, /*with_residual=*/true, /*forked=*/true);  // a block's
    ExpectTheHostsBits({8, 64, 16, 16}, type, /*relu=*/true, /*with_residual=*/false, /*forked=*/true);  // a stem's
  }
}

TEST_F(BatchNormActCuda, LeavesNchwHalfEvalAndMismatchesToAten) {
  torch::nn::BatchNorm2d bn(16);
  bn->to(torch::kCUDA);
  const torch::Tensor x = ChannelsLastOnCuda(torch::randn({4, 16, 8, 8}));
  EXPECT_TRUE(FusedBatchNormApplies(x, *bn, {}));
  EXPECT_TRUE(FusedBatchNormApplies(x.to(torch::kBFloat16), *bn, x.to(torch::kBFloat16)));
  EXPECT_FALSE(FusedBatchNormApplies(x.contiguous(), *bn, {})) << "NCHW";
  EXPECT_FALSE(FusedBatchNormApplies(x, *bn, x.contiguous())) << "an NCHW residual";
  EXPECT_FALSE(FusedBatchNormApplies(x.to(torch::kHalf), *bn, {}));
  EXPECT_FALSE(FusedBatchNormApplies(x, *bn, x.to(torch::kBFloat16))) << "a residual of another type";
  EXPECT_FALSE(FusedBatchNormApplies(ChannelsLastOnCuda(torch::randn({1, 16, 1, 1})), *bn, {})) << "one row";
  bn->eval();
  EXPECT_FALSE(FusedBatchNormApplies(x, *bn, {}));
  bn->train();
  UseFusedKernels(false);
  EXPECT_FALSE(FusedBatchNormApplies(x, *bn, {}));
  UseFusedKernels(true);
  torch::nn::BatchNorm2d twelve(12);
  twelve->to(torch::kCUDA);
  EXPECT_FALSE(FusedBatchNormApplies(ChannelsLastOnCuda(torch::randn({4, 12, 8, 8})), *twelve, {}))
      << "channels not a whole vector";
  torch::nn::BatchNorm2d on_the_cpu(16);
  EXPECT_FALSE(FusedBatchNormApplies(x, *on_the_cpu, {})) << "ATen reports the devices' mismatch";
}

// VGG's conv + batch norm + relu under bfloat16 autocast, the conv's bias folded into the kernels,
// against ATen's (which adds the bias in bfloat16 and rounds) and float32's reference: at least as
// close to the reference as ATen's, the running statistics the reference's, and a zero bias
// gradient (the reference's is float32's residue of a zero sum).
TEST_F(BatchNormActCuda, FoldsAConvolutionsBiasAtLeastAsAccuratelyAsAtenAddsIt) {
  torch::manual_seed(3);
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(32, 64, 3).padding(1));
  torch::nn::BatchNorm2d bn(64);
  conv->to(torch::kCUDA), bn->to(torch::kCUDA);
  {
    torch::NoGradGuard no_grad;
    conv->bias.add_(2.0);  // a bias that moves the mean
  }
  const torch::Tensor x = ChannelsLastOnCuda(torch::randn({16, 32, 12, 12}));
  const torch::Tensor gy = ChannelsLastOnCuda(torch::randn({16, 64, 12, 12}));
  struct Result {
    torch::Tensor y, gx, gweight, gbias, ggamma, running_mean, running_var;
  };
  const auto run = [&](bool fused, bool bf16) {
    UseFusedKernels(fused);
    auto c = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(conv->clone());
    auto b = std::dynamic_pointer_cast<torch::nn::BatchNorm2dImpl>(bn->clone());
    const torch::Tensor input = x.clone().requires_grad_();
    torch::Tensor y;
    if (bf16) {
      AutocastScope autocast(torch::kCUDA, torch::kBFloat16);
      y = ConvBatchNormAct(input, *c, *b, Activation::kRelu);
    } else {
      y = ConvBatchNormAct(input, *c, *b, Activation::kRelu);
    }
    y.backward(gy.to(y.scalar_type()));
    UseFusedKernels(true);
    return Result{y.to(torch::kFloat), input.grad(), c->weight.grad(), c->bias.grad(), b->weight.grad(),
                  b->running_mean, b->running_var};
  };
  const Result fused = run(true, true), aten = run(false, true), reference = run(false, false);
  const auto error = [](const torch::Tensor& ours, const torch::Tensor& theirs) {
    return (ours - theirs).abs().max().item<double>();
  };
  const auto expect_as_close = [&](torch::Tensor Result::*field, const char* what) {
    EXPECT_LE(error(fused.*field, reference.*field), 1.25 * error(aten.*field, reference.*field) + 1e-6) << what;
  };
  expect_as_close(&Result::y, "y");
  expect_as_close(&Result::gx, "gx");
  expect_as_close(&Result::gweight, "the conv's weight gradient");
  expect_as_close(&Result::ggamma, "gamma's gradient");
  EXPECT_LE(error(fused.running_mean, reference.running_mean), 1e-3) << "running mean";
  EXPECT_LE(error(fused.running_var, reference.running_var), 1e-2) << "running variance";
  EXPECT_TRUE(torch::equal(fused.gbias, torch::zeros_like(fused.gbias))) << "the folded bias's gradient";
}

struct Training {
  std::vector<double> losses;
  torch::Tensor start, end;  // every parameter before and after, as one double vector on the CPU
};

torch::Tensor FlatParameters(torch::nn::Module& model) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : model.parameters()) flat.push_back(p.detach().flatten().to(torch::kCPU, torch::kDouble));
  return torch::cat(flat);
}

struct ResNetRun {
  int depth;
  int64_t side, batch;  // the images' side picks the stem: CIFAR's at 32, ImageNet's (max-pool) at 96
};

// The run's ResNet, channels-last on the GPU, and its random batch of 10 classes: the same in every
// call.
std::tuple<std::shared_ptr<ResNet>, torch::Tensor, torch::Tensor> ResNetOnABatch(const ResNetRun& run) {
  torch::manual_seed(12);
  auto model = std::make_shared<ResNet>(run.depth, 3, 10, run.side, run.side);
  model->to(torch::kCUDA);
  ConvertToChannelsLast(*model);
  torch::Tensor images =
      ImagesInFormat(torch::randn({run.batch, 3, run.side, run.side}).to(torch::kCUDA), /*channels_last=*/true);
  return {model, images, torch::randint(10, {run.batch}).to(torch::kCUDA)};
}

// A ResNet as mgpu trains it fastest (channels-last, bfloat16 autocast, SGD with momentum): `steps`
// steps on one random batch.
Training TrainResNet(const ResNetRun& run, bool fused_kernels, int steps) {
  UseFusedKernels(fused_kernels);
  const auto [model, images, labels] = ResNetOnABatch(run);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  Training t;
  t.start = FlatParameters(*model);
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    torch::Tensor loss;
    {
      AutocastScope autocast(torch::kCUDA, torch::kBFloat16);
      loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
    }
    loss.backward();
    sgd.step();
    t.losses.push_back(loss.item<double>());
  }
  t.end = FlatParameters(*model);
  UseFusedKernels(true);
  return t;
}

// bfloat16's activations round differently in the two (the kernels round a block's output once,
// ATen's bn, add and relu each round theirs), and the training feeds that back: on an H100 the
// losses of five steps parted by 0.4% at most, the parameters by 0.5% of their norm (their moves
// by a third of theirs: bfloat16 perturbs the weight gradients' long cancelling sums, so those are
// not compared), while kernels that dropped gx's mean(g x̂) term parted the last loss by 5.6%.
TEST_F(BatchNormActCuda, ResNet18TrainsAsWithAtensKernels) {
  constexpr int kSteps = 5;
  const ResNetRun run{18, 32, 64};
  const Training aten = TrainResNet(run, false, kSteps), fused = TrainResNet(run, true, kSteps);
  ASSERT_TRUE(torch::equal(fused.start, aten.start)) << "the same initialization";
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_NEAR(fused.losses[step], aten.losses[step], 0.02 * aten.losses[step]) << "step " << step;
  }
  EXPECT_LT(fused.losses.back(), 0.5 * fused.losses.front()) << "the batch is being learnt";
  const double apart = ((fused.end - aten.end).norm() / aten.end.norm()).item<double>();
  EXPECT_LT(apart, 0.02) << "the parameters apart, relative to their norm";
}

// One forward and backward of a ResNet on a random batch: the loss and every parameter's
// gradient, flattened into one double vector on the CPU. Under bfloat16 autocast, or in float32
// without TF32 (the reference).
struct OneStep {
  double loss;
  torch::Tensor gradients;
};

OneStep RunOneStep(const ResNetRun& run, bool fused_kernels, bool bf16) {
  UseFusedKernels(fused_kernels);
  at::globalContext().setAllowTF32CuDNN(bf16);
  at::globalContext().setAllowTF32CuBLAS(bf16);
  const auto [model, images, labels] = ResNetOnABatch(run);
  torch::Tensor loss;
  if (bf16) {
    AutocastScope autocast(torch::kCUDA, torch::kBFloat16);
    loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
  } else {
    loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
  }
  loss.backward();
  std::vector<torch::Tensor> flat;
  for (const auto& p : model->parameters()) flat.push_back(p.grad().flatten().to(torch::kCPU, torch::kDouble));
  UseFusedKernels(true);
  at::globalContext().setAllowTF32CuDNN(true);
  at::globalContext().setAllowTF32CuBLAS(false);
  return {loss.item<double>(), torch::cat(flat)};
}

// The ImageNet stem's max-pool (models/max_pool.h) and the bottlenecks' forked outputs. Training
// compares badly here: at any learning rate that moves a ResNet-50 on a random batch, five steps
// part ATen's own bfloat16 run from itself. One step's gradient does not feed back: the kernels'
// must be as close to float32's as ATen's is (bfloat16's error is most of either).
TEST_F(BatchNormActCuda, ResNet50sGradientIsAsCloseToFloat32sAsWithAtensKernels) {
  const ResNetRun run{50, 96, 32};
  const OneStep reference = RunOneStep(run, false, false), aten = RunOneStep(run, false, true),
                fused = RunOneStep(run, true, true);
  const auto error = [&](const OneStep& s) {
    return ((s.gradients - reference.gradients).norm() / reference.gradients.norm()).item<double>();
  };
  EXPECT_LE(std::abs(fused.loss - reference.loss), 1.25 * std::abs(aten.loss - reference.loss) + 2e-3 * reference.loss)
      << "losses: fused " << fused.loss << ", ATen's " << aten.loss << ", float32's " << reference.loss;
  EXPECT_LE(error(fused), 1.25 * error(aten) + 1e-3) << "gradients' relative error: fused " << error(fused)
                                                     << ", ATen's " << error(aten);
}

}  // namespace
}  // namespace mgpu
