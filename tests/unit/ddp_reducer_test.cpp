// Specification of DDP's bucket plan and reducer. The reducer runs in-process against a
// "mirror" communicator that plays a second rank holding exactly this rank's gradients (a sum is
// a doubling), so averaged gradients must equal the local ones, and every launch is recorded.
#include <algorithm>
#include <optional>

#include <gtest/gtest.h>

#include "amp/autocast.h"
#include "amp/low_precision_weights.h"
#include "common/status.h"
#include "ddp/bucket_plan.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/flat_buffers.h"
#include "models/memory_format.h"

namespace mgpu {
namespace {

TEST(BucketPlan, FirstBucketIsSmallThenBucketsFillToTheCap) {
  // Six 400-byte parameters, reverse order, first cap 500, cap 1000.
  std::vector<ParameterSlot> slots(6, ParameterSlot{400, "Float@cpu"});
  BucketPlan plan = PlanBuckets(slots, {5, 4, 3, 2, 1, 0}, 500, 1000, 0);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<size_t>>{{5, 4}, {3, 2, 1}, {0}}));
}

TEST(BucketPlan, GroupsNeverShareABucket) {
  std::vector<ParameterSlot> slots = {{100, "Float@cpu"}, {100, "Half@cpu"}, {100, "Float@cpu"}, {100, "Half@cpu"}};
  BucketPlan plan = PlanBuckets(slots, {3, 2, 1, 0}, 1 << 20, 1 << 20, 0);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<size_t>>{{3, 1}, {2, 0}}));
}

TEST(BucketPlan, AParameterLargerThanTheCapStandsAlone) {
  std::vector<ParameterSlot> slots = {{10, "f"}, {5000, "f"}, {10, "f"}};
  BucketPlan plan = PlanBuckets(slots, {2, 1, 0}, 100, 100, 0);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<size_t>>{{2, 1}, {0}}));
}

TEST(BucketPlan, OrderMustListEveryParameterOnce) {
  std::vector<ParameterSlot> slots(3, ParameterSlot{4, "f"});
  EXPECT_THROW(PlanBuckets(slots, {0, 1}, 10, 10, 0), std::invalid_argument);
  EXPECT_THROW(PlanBuckets(slots, {0, 1, 1}, 10, 10, 0), std::invalid_argument);
}

TEST(BucketPlan, TheLastReadyParametersFormASmallLastBucket) {
  // As above, plus a last-bucket cap of 800: parameters 1 and 0 (800 bytes) are launched last
  // and alone, so {3, 2} no longer waits for the end of backward.
  std::vector<ParameterSlot> slots(6, ParameterSlot{400, "Float@cpu"});
  BucketPlan plan = PlanBuckets(slots, {5, 4, 3, 2, 1, 0}, 500, 1000, 800);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<size_t>>{{5, 4}, {3, 2}, {1, 0}}));
}

TEST(BucketPlan, ALastParameterLargerThanTheLastCapIsTheLastBucketAlone) {
  std::vector<ParameterSlot> slots = {{5000, "f"}, {10, "f"}, {10, "f"}};
  BucketPlan plan = PlanBuckets(slots, {2, 1, 0}, 100, 100, 100);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<size_t>>{{2, 1}, {0}}));
}

TEST(BucketPlan, AGroupWithinTheLastCapStaysOneBucket) {
  std::vector<ParameterSlot> slots(3, ParameterSlot{10, "f"});
  BucketPlan plan = PlanBuckets(slots, {2, 1, 0}, 100, 100, 100);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<size_t>>{{2, 1, 0}}));
}

TEST(BucketPlan, EveryGroupGetsItsOwnLastBucketAfterAllOthers) {
  std::vector<ParameterSlot> slots = {{100, "Float@cpu"}, {100, "Half@cpu"}, {100, "Float@cpu"}, {100, "Half@cpu"}};
  BucketPlan plan = PlanBuckets(slots, {3, 2, 1, 0}, 1 << 20, 1 << 20, 100);
  EXPECT_EQ(plan.buckets, (std::vector<std::vector<size_t>>{{3}, {2}, {1}, {0}}));
}

class DoneWork : public CollectiveWork {
 public:
  void Wait() override {}
};

class MirrorCommunicator : public Communicator {
 public:
  std::string backend() const override { return "mirror"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::unique_ptr<CollectiveWork> AllReduceSum(torch::Tensor tensor, const std::string& what) override {
    launches.push_back(what);
    tensor.mul_(2);
    return std::make_unique<DoneWork>();
  }
  // The other rank holds the same gradients: their mean is this rank's.
  std::unique_ptr<CollectiveWork> AllReduceMean(torch::Tensor, const std::string& what) override {
    launches.push_back(what);
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<CollectiveWork> Broadcast(torch::Tensor tensor, int, const std::string& what) override {
    broadcasts.push_back(what);
    broadcast_tensors.push_back(tensor);
    return std::make_unique<DoneWork>();
  }
  std::unique_ptr<CollectiveWork> AllGather(torch::Tensor output, torch::Tensor input, const std::string&) override {
    output.view({2, -1}).copy_(input.reshape({1, -1}).expand({2, -1}));
    if (corrupt_rank_one_signature && input.numel() > 3) output.view({2, -1})[1][3] += 1;  // rank 1's first dim
    return std::make_unique<DoneWork>();
  }
  void Barrier(const std::string&) override {}

  std::vector<std::string> launches;
  std::vector<std::string> broadcasts;
  std::vector<torch::Tensor> broadcast_tensors;
  bool corrupt_rank_one_signature = false;
};

struct Mlp : torch::nn::Module {
  Mlp() {
    a = register_module("a", torch::nn::Linear(8, 16));
    b = register_module("b", torch::nn::Linear(16, 16));
    c = register_module("c", torch::nn::Linear(16, 4));
    unused = register_module("unused", torch::nn::Linear(4, 4));
  }
  torch::Tensor forward(torch::Tensor x) { return c(torch::relu(b(torch::relu(a(x))))); }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr}, unused{nullptr};
};

// Gradients of the same model without DDP.
std::vector<torch::Tensor> LocalGradients(const std::shared_ptr<Mlp>& model, const torch::Tensor& x) {
  model->zero_grad();
  model->forward(x).pow(2).sum().backward();
  std::vector<torch::Tensor> grads;
  for (auto& p : model->parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  model->zero_grad();
  return grads;
}

DdpOptions SmallBuckets() {
  DdpOptions options;
  options.first_bucket_cap_bytes = 64;
  options.bucket_cap_bytes = 600;
  options.find_unused_parameters = true;
  return options;
}

TEST(DistributedDataParallel, AveragedGradientsEqualLocalOnesAndBucketsLaunchInOrder) {
  torch::manual_seed(0);
  auto model = std::make_shared<Mlp>();
  const torch::Tensor x = torch::randn({5, 8});
  const std::vector<torch::Tensor> expected = LocalGradients(model, x);
  MirrorCommunicator mirror;
  DistributedDataParallel ddp(model, mirror, SmallBuckets());
  const size_t buckets = ddp.BucketBytes().size();
  ASSERT_GE(buckets, 3u);
  for (int step = 0; step < 2; ++step) {
    mirror.launches.clear();
    ddp.ZeroGrad();
    ddp.PrepareForward();
    model->forward(x).pow(2).sum().backward();
    ddp.FinishBackward();
    auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (!expected[i].defined()) {
        EXPECT_EQ(params[i].grad().abs().sum().item<float>(), 0.0f) << "unused parameters reduce as zeros";
      } else {
        EXPECT_TRUE(torch::allclose(params[i].grad(), expected[i])) << "parameter " << i << " step " << step;
      }
    }
    ASSERT_EQ(mirror.launches.size(), ddp.BucketBytes().size());
    for (size_t b = 0; b < mirror.launches.size(); ++b) {
      EXPECT_EQ(mirror.launches[b].rfind("gradient bucket " + std::to_string(b) + " of", 0), 0u) << mirror.launches[b];
    }
  }
  EXPECT_TRUE(ddp.rebuilt());
}

TEST(DistributedDataParallel, RebuiltPlanFollowsTheObservedGradientOrder) {
  auto model = std::make_shared<Mlp>();
  MirrorCommunicator mirror;
  DistributedDataParallel ddp(model, mirror, SmallBuckets());
  model->forward(torch::randn({2, 8})).sum().backward();
  ddp.FinishBackward();
  // Parameters 4 and 5 (layer c) become ready first; the unused layer (6, 7) goes last.
  const auto members = ddp.BucketMembers();
  ASSERT_FALSE(members.empty());
  EXPECT_TRUE(members.front().front() == 4 || members.front().front() == 5);
  EXPECT_TRUE(members.back().back() == 6 || members.back().back() == 7);
}

TEST(DistributedDataParallel, TheLastBucketHoldsTheParametersReadyLast) {
  auto model = std::make_shared<Mlp>();
  MirrorCommunicator mirror;
  DdpOptions options = SmallBuckets();
  options.last_bucket_cap_bytes = 200;
  DistributedDataParallel ddp(model, mirror, options);
  model->forward(torch::randn({2, 8})).sum().backward();
  ddp.FinishBackward();
  // Observed order: c, b, a, then the unused layer (6, 7: 80 bytes), which ends the order.
  const std::vector<std::vector<size_t>> members = ddp.BucketMembers();
  ASSERT_GE(members.size(), 2u);
  EXPECT_LE(ddp.BucketBytes().back(), 200);
  EXPECT_NE(std::find(members.back().begin(), members.back().end(), 6), members.back().end());
  EXPECT_NE(std::find(members.back().begin(), members.back().end(), 7), members.back().end());
}

struct NormNet : torch::nn::Module {
  NormNet() {
    linear = register_module("linear", torch::nn::Linear(4, 6));
    norm = register_module("norm", torch::nn::BatchNorm1d(6));
  }
  torch::Tensor forward(torch::Tensor x) { return norm(linear(x)); }
  torch::nn::Linear linear{nullptr};
  torch::nn::BatchNorm1d norm{nullptr};
};

TEST(DistributedDataParallel, BuffersAreBroadcastInPlaceAsOneTensorPerDtype) {
  auto model = std::make_shared<NormNet>();
  MirrorCommunicator mirror;
  DistributedDataParallel ddp(model, mirror, DdpOptions{});
  mirror.broadcasts.clear();
  mirror.broadcast_tensors.clear();
  ddp.PrepareForward();
  // running_mean and running_var (float) in one tensor, num_batches_tracked (long) in another.
  ASSERT_EQ(mirror.broadcast_tensors.size(), 2u);
  const torch::Tensor floats = mirror.broadcast_tensors[0], counts = mirror.broadcast_tensors[1];
  EXPECT_EQ(floats.numel(), 12);
  EXPECT_EQ(counts.numel(), 1);
  // The module's buffers are views of the broadcast tensors: batch norm's updates land there.
  model->forward(torch::randn({8, 4}) + 3);
  EXPECT_TRUE(torch::equal(floats.narrow(0, 0, 6), model->norm->running_mean));
  EXPECT_GT(model->norm->running_mean.abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(counts.item<int64_t>(), 1);
}

TEST(DistributedDataParallel, MissingGradientsAreAnErrorWithoutFindUnusedParameters) {
  auto model = std::make_shared<Mlp>();
  MirrorCommunicator mirror;
  DdpOptions options;
  DistributedDataParallel ddp(model, mirror, options);
  model->forward(torch::randn({2, 8})).sum().backward();
  try {
    ddp.FinishBackward();
    FAIL() << "expected an error naming the unused parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unused.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--find-unused-parameters"), std::string::npos) << e.what();
  }
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyAndTheNextSyncReducesTheSum) {
  torch::manual_seed(1);
  auto model = std::make_shared<Mlp>();
  const torch::Tensor x = torch::randn({4, 8});
  const std::vector<torch::Tensor> once = LocalGradients(model, x);
  MirrorCommunicator mirror;
  DistributedDataParallel ddp(model, mirror, SmallBuckets());
  {
    DistributedDataParallel::NoSync local(ddp);
    model->forward(x).pow(2).sum().backward();
    ddp.FinishBackward();
  }
  EXPECT_TRUE(mirror.launches.empty()) << "nothing is reduced inside no_sync";
  model->forward(x).pow(2).sum().backward();
  ddp.FinishBackward();
  EXPECT_TRUE(torch::allclose(model->a->weight.grad(), 2 * once[0]));
}

TEST(DistributedDataParallel, GradientsInTheBucketsAndCopiedOutOfThemAreTheSame) {
  torch::manual_seed(2);
  auto model = std::make_shared<Mlp>();
  const torch::Tensor x = torch::randn({3, 8});
  const std::vector<torch::Tensor> expected = LocalGradients(model, x);
  for (bool as_view : {true, false}) {
    MirrorCommunicator mirror;
    DdpOptions options = SmallBuckets();
    options.gradient_as_bucket_view = as_view;
    DistributedDataParallel ddp(model, mirror, options);
    for (int step = 0; step < 3; ++step) {
      ddp.ZeroGrad();
      model->forward(x).pow(2).sum().backward();
      ddp.FinishBackward();
      EXPECT_TRUE(torch::allclose(model->b->weight.grad(), expected[2])) << "view " << as_view << " step " << step;
    }
    EXPECT_EQ(model->c->weight.grad().is_view(), as_view) << "a view of its bucket exactly when asked";
    ddp.ZeroGrad();
    for (const auto& p : model->parameters()) {
      EXPECT_FALSE(p.grad().defined()) << "ZeroGrad sets gradients to none, so the next backward's are autograd's own";
    }
  }
}

// The other rank's gradients are zeros: the mean halves this rank's.
class HalvingCommunicator : public MirrorCommunicator {
 public:
  std::unique_ptr<CollectiveWork> AllReduceMean(torch::Tensor tensor, const std::string& what) override {
    tensor.mul_(0.5);
    return MirrorCommunicator::AllReduceMean(tensor, what);
  }
};

// FinishBackward's per-bucket callback (an optimizer stepped per bucket): once per bucket in
// launch order, every parameter in exactly one call, and its gradient final by then, with
// gradients in the buckets or copied out of them.
TEST(DistributedDataParallel, EachBucketIsHandedOverOnceItsGradientsAreFinal) {
  for (const bool as_views : {true, false}) {
    torch::manual_seed(2);
    auto model = std::make_shared<Mlp>();
    const torch::Tensor x = torch::randn({4, 8});
    const std::vector<torch::Tensor> local = LocalGradients(model, x);
    HalvingCommunicator halving;
    DdpOptions options = SmallBuckets();
    options.gradient_as_bucket_view = as_views;
    DistributedDataParallel ddp(model, halving, options);
    const auto parameters = model->parameters();
    for (int step = 0; step < 2; ++step) {  // the second after the bucket rebuild
      ddp.ZeroGrad();
      if (!as_views) {  // gradients of their own, which the averages are copied into
        for (auto& p : parameters) p.mutable_grad() = torch::zeros_like(p);
      }
      model->forward(x).pow(2).sum().backward();
      const auto plan = ddp.BucketMembers();
      std::vector<std::vector<size_t>> handed;
      std::vector<bool> seen(parameters.size(), false);
      ddp.FinishBackward([&](const std::vector<size_t>& members) {
        handed.push_back(members);
        for (size_t i : members) {
          EXPECT_FALSE(seen[i]) << "parameter " << i << " handed over twice";
          seen[i] = true;
          const torch::Tensor expected = local[i].defined() ? local[i] / 2 : torch::zeros_like(parameters[i]);
          EXPECT_TRUE(torch::allclose(parameters[i].grad(), expected)) << "parameter " << i << " at its bucket";
        }
      });
      EXPECT_EQ(handed, plan) << "in launch order, as the buckets hold them";
      EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(parameters.size()));
    }
  }
}

TEST(DistributedDataParallel, BucketViewsKeepAChannelsLastParametersLayout) {
  auto model = std::make_shared<torch::nn::Module>();
  auto conv = model->register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
  conv->weight.set_data(conv->weight.contiguous(torch::MemoryFormat::ChannelsLast));
  MirrorCommunicator mirror;
  DistributedDataParallel ddp(model, mirror, DdpOptions{});
  const torch::Tensor x = torch::randn({2, 3, 5, 5}).contiguous(torch::MemoryFormat::ChannelsLast);
  conv->forward(x).sum().backward();
  ddp.FinishBackward();
  EXPECT_EQ(conv->weight.grad().strides(), conv->weight.strides());
  EXPECT_TRUE(conv->weight.grad().is_contiguous(torch::MemoryFormat::ChannelsLast));
}

// A conv net for autocast: convolutions and a linear layer whose weights get low-precision copies,
// and a conv bias (float32 under autocast) in the same buckets.
struct ConvNet : torch::nn::Module {
  ConvNet() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1).bias(false)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 8, 3).padding(1)));
    fc = register_module("fc", torch::nn::Linear(8, 4));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc(torch::relu(conv2(torch::relu(conv1(x)))).mean({2, 3})).to(torch::kFloat);  // (B, 4)
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc{nullptr};
};

// The averaged gradients of two steps of `model` under CPU autocast (bf16), the forward on
// low-precision copies of the weights when `copies` is set.
std::vector<torch::Tensor> AutocastDdpGradients(const std::shared_ptr<ConvNet>& model, bool copies, bool channels_last) {
  if (channels_last) ConvertToChannelsLast(*model);
  MirrorCommunicator mirror;
  DistributedDataParallel ddp(model, mirror, SmallBuckets());
  const auto weights = copies ? LowPrecisionWeights::Of(*model, torch::kBFloat16) : nullptr;
  if (weights) {
    weights->ForEachPair([&](const torch::Tensor& p, const torch::Tensor& copy) { ddp.ReceiveGradientThrough(p, copy); });
  }
  std::vector<torch::Tensor> gradients;
  torch::manual_seed(5);
  for (int step = 0; step < 2; ++step) {  // the second after the bucket rebuild
    torch::Tensor x = torch::randn({3, 3, 6, 6});
    if (channels_last) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
    ddp.ZeroGrad();
    ddp.PrepareForward();
    torch::Tensor loss;
    {
      AutocastScope autocast(torch::kCPU, torch::kBFloat16);
      std::optional<LowPrecisionWeights::InForward> in_forward;
      if (weights) in_forward.emplace(*weights);
      loss = model->forward(x).pow(2).sum();
    }
    loss.backward();
    ddp.FinishBackward();
    for (const auto& p : model->parameters()) gradients.push_back(p.grad().clone());
  }
  return gradients;
}

// Low-precision weight copies under DDP: the hooks watch the copies, and the buckets take their
// bfloat16 gradients beside the float32 ones, converted; the averages are autocast's bit for bit.
TEST(DistributedDataParallel, TakesLowPrecisionCopiesGradientsAsAutocastsOwn) {
  for (const bool channels_last : {false, true}) {
    torch::manual_seed(3);
    auto plain = std::make_shared<ConvNet>(), batched = std::make_shared<ConvNet>();
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < plain->parameters().size(); ++i) batched->parameters()[i].copy_(plain->parameters()[i]);
    }
    const auto expected = AutocastDdpGradients(plain, /*copies=*/false, channels_last);
    const auto actual = AutocastDdpGradients(batched, /*copies=*/true, channels_last);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(actual[i].scalar_type(), torch::kFloat) << i;
      EXPECT_TRUE(torch::equal(actual[i], expected[i])) << "gradient " << i << (channels_last ? ", channels-last" : "");
    }
  }
}

TEST(DistributedDataParallel, ReceivingAGradientThroughATensorThatIsNoParameterIsAnError) {
  auto model = std::make_shared<Mlp>();
  MirrorCommunicator mirror;
  DistributedDataParallel ddp(model, mirror, SmallBuckets());
  EXPECT_THROW(ddp.ReceiveGradientThrough(torch::zeros({2}), torch::zeros({2}, torch::kBFloat16)), Error);
}

// FlatBuffers (DDP's broadcast buffers, DataParallel's replicas): a channels-last weight's view
// has its strides, so the weight keeps its layout once it is made a view of the buffer.
TEST(FlatBuffers, ViewsKeepAChannelsLastTensorsStridesAndPackCopiesElementForElement) {
  const std::vector<torch::Tensor> like = {torch::randn({4, 3, 3, 3}).contiguous(torch::MemoryFormat::ChannelsLast),
                                           torch::randn({4}), torch::randn({2, 3})};
  FlatBuffers flat(like, torch::Device(torch::kCPU));
  ASSERT_EQ(flat.groups().size(), 1u);
  EXPECT_EQ(flat.groups()[0].numel(), 4 * 27 + 4 + 6);
  for (size_t k = 0; k < like.size(); ++k) {
    EXPECT_EQ(flat.views()[k].sizes(), like[k].sizes()) << k;
    EXPECT_EQ(flat.views()[k].strides(), like[k].strides()) << k;
  }
  flat.Pack(like);
  for (size_t k = 0; k < like.size(); ++k) EXPECT_TRUE(torch::equal(flat.views()[k], like[k])) << k;
  // The weight's 27 elements of output channel 0 lie in memory in NHWC order, one run of 3 per pixel.
  EXPECT_TRUE(torch::equal(flat.groups()[0].narrow(0, 0, 3), like[0][0].select(1, 0).select(1, 0)));

  const std::vector<torch::Tensor> nchw = {like[0].contiguous(), like[1], like[2]};
  EXPECT_FALSE(flat.Matches(FlatBuffers(nchw, torch::Device(torch::kCPU))))
      << "replicas in other layouts do not line up element for element";
  EXPECT_TRUE(flat.Matches(FlatBuffers(like, torch::Device(torch::kCPU))));
}

TEST(DistributedDataParallel, ADifferentModelOnAnotherRankIsNamed) {
  auto model = std::make_shared<Mlp>();
  MirrorCommunicator mirror;
  mirror.corrupt_rank_one_signature = true;
  try {
    DistributedDataParallel ddp(model, mirror, DdpOptions{});
    FAIL() << "expected BadInputError";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 0 'a.weight' is 16x8 Float on rank 0 but 17x8 Float on rank 1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mgpu
