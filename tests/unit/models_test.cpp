// Specification of the model zoo: parameter counts of the reference implementations and
// output shapes.
#include <gtest/gtest.h>

#include "common/status.h"
#include "models/channel_bias.h"
#include "models/memory_format.h"
#include "models/model_factory.h"
#include "models/resnet.h"

namespace mgpu {
namespace {

TEST(LeNet, HasTheClassicParameterCount) {
  auto model = MakeModel("lenet", ModelShape{1, 10, 28, 28});
  EXPECT_EQ(CountParameters(*model), 61706);
}

TEST(LeNet, MapsImagesToLogits) {
  auto model = MakeModel("lenet", ModelShape{3, 7, 32, 32});
  torch::Tensor logits = model->forward(torch::randn({5, 3, 32, 32}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{5, 7}));
}

// AddChannelBias against x + bias.view(1, C, 1, 1), for an activation `x` (float32 or bf16, either
// layout) and a float32 bias, under a loss that weighs the output by `upstream`: the same output and
// x gradient, and the bias gradient summed exactly (in double) from the gradient reaching the bias
// (upstream, rounded to x's dtype), within float32 rounding: accumulated in float32 even where x is
// bf16 (a broadcast add's bias gradient would be rounded to bf16).
void ExpectTheBroadcastAddsGradients(const torch::Tensor& x, const torch::Tensor& upstream) {
  torch::manual_seed(5);
  const torch::Tensor bias = torch::randn({x.size(1)});
  const torch::Tensor x1 = x.detach().requires_grad_(), b1 = bias.clone().requires_grad_();
  const torch::Tensor x2 = x.detach().requires_grad_();
  const torch::Tensor ours = AddChannelBias(x1, b1);
  const torch::Tensor theirs = x2 + bias.to(x.scalar_type()).view({1, -1, 1, 1});
  EXPECT_EQ(ours.scalar_type(), x.scalar_type());
  EXPECT_TRUE(torch::equal(ours, theirs));
  (ours.to(torch::kFloat) * upstream).sum().backward();
  (theirs.to(torch::kFloat) * upstream).sum().backward();
  EXPECT_TRUE(torch::equal(x1.grad(), x2.grad()));
  ASSERT_EQ(b1.grad().scalar_type(), torch::kFloat);
  const torch::Tensor exact = upstream.to(x.scalar_type()).to(torch::kDouble).sum({0, 2, 3});
  EXPECT_TRUE(torch::allclose(b1.grad().to(torch::kDouble), exact, /*rtol=*/1e-5, /*atol=*/1e-5))
      << b1.grad() << exact;
}

TEST(AddChannelBias, HasTheGradientsOfTheBroadcastAdd) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({4, 3, 5, 7}), upstream = torch::randn({4, 3, 5, 7});
  ExpectTheBroadcastAddsGradients(x, upstream);
  ExpectTheBroadcastAddsGradients(x.contiguous(torch::MemoryFormat::ChannelsLast), upstream);
}

TEST(AddChannelBias, KeepsAHalfPrecisionActivationsTypeAndAFloat32BiasGradient) {
  torch::manual_seed(4);
  ExpectTheBroadcastAddsGradients(torch::randn({4, 3, 5, 7}).to(torch::kBFloat16), torch::randn({4, 3, 5, 7}));
}

TEST(AddChannelBias, RefusesABiasThatDoesNotMatchTheChannels) {
  EXPECT_THROW(AddChannelBias(torch::zeros({2, 3, 4, 4}), torch::zeros({4})), Error);
  EXPECT_THROW(AddChannelBias(torch::zeros({2, 3}), torch::zeros({3})), Error);
}

// Two copies of `name` with the same initial weights, the second converted to channels-last.
std::pair<std::shared_ptr<Classifier>, std::shared_ptr<Classifier>> NchwAndChannelsLast(const std::string& name,
                                                                                       ModelShape shape) {
  torch::manual_seed(3);
  auto nchw = MakeModel(name, shape);
  torch::manual_seed(3);
  auto channels_last = MakeModel(name, shape);
  ConvertToChannelsLast(*channels_last);
  return {nchw, channels_last};
}

TEST(ChannelsLast, RestridesEveryConvolutionWeightAndKeepsTheLogits) {
  auto [nchw, channels_last] = NchwAndChannelsLast("resnet18", ModelShape{3, 10, 16, 16});
  int64_t four_dimensional = 0;
  for (const auto& p : channels_last->parameters()) {
    if (p.dim() != 4) continue;
    ++four_dimensional;
    EXPECT_TRUE(p.is_contiguous(torch::MemoryFormat::ChannelsLast));
  }
  EXPECT_EQ(four_dimensional, 20) << "ResNet-18's convolutions, shortcut projections included";
  const torch::Tensor images = torch::randn({2, 3, 16, 16});
  EXPECT_TRUE(torch::allclose(channels_last->forward(ImagesInFormat(images, /*channels_last=*/true)),
                              nchw->forward(images), 1e-4, 1e-5));
  EXPECT_TRUE(ImagesInFormat(images, /*channels_last=*/false).is_same(images));
}

TEST(ChannelsLast, GradientsEqualTheDefaultLayouts) {
  auto [nchw, channels_last] = NchwAndChannelsLast("lenet", ModelShape{1, 10, 28, 28});
  const torch::Tensor images = torch::randn({8, 1, 28, 28});
  const torch::Tensor labels = torch::randint(0, 10, {8});
  torch::nn::functional::cross_entropy(nchw->forward(images), labels).backward();
  torch::nn::functional::cross_entropy(channels_last->forward(ImagesInFormat(images, true)), labels).backward();
  const auto expected = nchw->parameters(), actual = channels_last->parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::allclose(actual[i].grad(), expected[i].grad(), 1e-4, 1e-6)) << "parameter " << i;
  }
}

TEST(ModelFactory, RejectsUnknownNamesAndImpossibleShapes) {
  EXPECT_THROW(MakeModel("resnet9000", ModelShape{}), BadInputError);
  EXPECT_THROW(MakeModel("vgg12", ModelShape{}), BadInputError);
  EXPECT_THROW(MakeModel("lenet", ModelShape{1, 10, 8, 8}), BadInputError);
  EXPECT_THROW(MakeModel("alexnet", ModelShape{3, 10, 32, 32}), BadInputError);
  EXPECT_THROW(MakeModel("vgg11", ModelShape{1, 10, 28, 28}), BadInputError);
}

TEST(ModelFactory, UserModelsAreRecognizedAndLabelledForFolderNames) {
  EXPECT_TRUE(IsUserModel("torchscript:net.pt"));
  EXPECT_TRUE(IsUserModel("plugin:libnets.so:tiny"));
  EXPECT_FALSE(IsUserModel("resnet18"));
  EXPECT_EQ(ModelLabel("resnet18"), "resnet18");
  EXPECT_EQ(ModelLabel("torchscript:/srv/models/v1.2/my_net.pt"), "torchscript-my_net");
  EXPECT_EQ(ModelLabel("plugin:/opt/nets/libnets.so:tiny_cnn"), "plugin-tiny_cnn");
}

TEST(ModelFactory, SmallImagesGetAMessageSayingHowToResize) {
  try {
    MakeModel("alexnet", ModelShape{3, 10, 32, 32});
    FAIL() << "expected BadInputError";
  } catch (const BadInputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("at least 63x63"), std::string::npos) << message;
    EXPECT_NE(message.find("got 32x32"), std::string::npos) << message;
    EXPECT_NE(message.find("--augment resize"), std::string::npos) << message;
  }
}

// Counts of torchvision 0.26's models (AlexNet, ResNet-50) and of the same architectures with
// the CIFAR stem or head (VGG-BN with Linear(512, 10); ResNet with a 3x3 stride-1 conv1 and no
// max-pool), summed over `parameters()` in Python.
struct ParameterCount {
  const char* model;
  ModelShape shape;
  int64_t parameters;
};

class ReferenceParameterCount : public ::testing::TestWithParam<ParameterCount> {};

TEST_P(ReferenceParameterCount, MatchesTheReferenceArchitecture) {
  const ParameterCount& expected = GetParam();
  auto model = MakeModel(expected.model, expected.shape);
  EXPECT_EQ(CountParameters(*model), expected.parameters);
}

INSTANTIATE_TEST_SUITE_P(
    Models, ReferenceParameterCount,
    ::testing::Values(ParameterCount{"alexnet", {3, 1000, 224, 224}, 61100840},
                      ParameterCount{"alexnet", {3, 1000, 227, 227}, 61100840},
                      ParameterCount{"vgg11", {3, 10, 32, 32}, 9231114},
                      ParameterCount{"vgg13", {3, 10, 32, 32}, 9416010},
                      ParameterCount{"vgg16", {3, 10, 32, 32}, 14728266},
                      ParameterCount{"vgg19", {3, 10, 32, 32}, 20040522},
                      ParameterCount{"resnet18", {3, 10, 32, 32}, 11173962},
                      ParameterCount{"resnet34", {3, 10, 32, 32}, 21282122},
                      ParameterCount{"resnet18", {3, 1000, 224, 224}, 11689512},
                      ParameterCount{"resnet50", {3, 1000, 224, 224}, 25557032},
                      ParameterCount{"resnet50", {3, 10, 32, 32}, 23520842},
                      // One input channel: conv1 loses 2 of its 3 input planes (2 x 64 x 3 x 3).
                      ParameterCount{"resnet18", {1, 10, 28, 28}, 11173962 - 2 * 64 * 9}),
    [](const ::testing::TestParamInfo<ParameterCount>& info) {
      return std::string(info.param.model) + "_" + std::to_string(info.param.shape.in_channels) +
             "x" + std::to_string(info.param.shape.height) + "_" +
             std::to_string(info.param.shape.num_classes) + "classes";
    });

// Runs one small batch through `name` and returns the logits' shape.
std::vector<int64_t> LogitShape(const std::string& name, const ModelShape& shape, int64_t batch) {
  torch::NoGradGuard no_grad;
  auto model = MakeModel(name, shape);
  model->eval();
  return model->forward(torch::randn({batch, shape.in_channels, shape.height, shape.width}))
      .sizes()
      .vec();
}

TEST(Models, VggAndResNetMapCifarSizedImagesToLogits) {
  for (const char* name : {"vgg11", "vgg13", "vgg16", "vgg19", "resnet18", "resnet34"}) {
    EXPECT_EQ(LogitShape(name, ModelShape{3, 10, 32, 32}, 2), (std::vector<int64_t>{2, 10})) << name;
  }
}

TEST(Models, VggTakesImagesLargerThan32Pixels) {
  EXPECT_EQ(LogitShape("vgg11", ModelShape{3, 5, 48, 40}, 2), (std::vector<int64_t>{2, 5}));
}

TEST(Models, ResNetTakesOneChannelFashionMnist) {
  EXPECT_EQ(LogitShape("resnet18", ModelShape{1, 10, 28, 28}, 3), (std::vector<int64_t>{3, 10}));
}

TEST(Models, ResNetPicksTheStemFromTheImageSize) {
  EXPECT_EQ(ResNet::StemFor(32, 32), ResNetStem::kCifar);
  EXPECT_EQ(ResNet::StemFor(64, 64), ResNetStem::kCifar);
  EXPECT_EQ(ResNet::StemFor(65, 64), ResNetStem::kImageNet);
  EXPECT_EQ(ResNet::StemFor(224, 224), ResNetStem::kImageNet);
  auto cifar = MakeModel("resnet18", ModelShape{3, 10, 16, 16});
  auto imagenet = MakeModel("resnet18", ModelShape{3, 10, 96, 96});
  EXPECT_EQ(cifar->named_parameters()["conv1.weight"].sizes(), (std::vector<int64_t>{64, 3, 3, 3}));
  EXPECT_EQ(imagenet->named_parameters()["conv1.weight"].sizes(), (std::vector<int64_t>{64, 3, 7, 7}));
}

TEST(Models, ResNet50AndAlexNetMapImageNetSizedImagesToLogits) {
  EXPECT_EQ(LogitShape("resnet50", ModelShape{3, 1000, 224, 224}, 1), (std::vector<int64_t>{1, 1000}));
  EXPECT_EQ(LogitShape("alexnet", ModelShape{3, 10, 227, 227}, 2), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(LogitShape("alexnet", ModelShape{3, 10, 64, 64}, 1), (std::vector<int64_t>{1, 10}));
}

TEST(Models, ParameterNamesFollowTorchvision) {
  auto resnet = MakeModel("resnet50", ModelShape{3, 1000, 224, 224});
  const auto resnet_params = resnet->named_parameters();
  for (const char* name : {"conv1.weight", "bn1.weight", "layer1.0.conv3.weight",
                           "layer1.0.downsample.0.weight", "layer1.0.downsample.1.bias",
                           "layer4.2.bn3.weight", "fc.weight", "fc.bias"}) {
    EXPECT_TRUE(resnet_params.contains(name)) << name;
  }
  EXPECT_TRUE(resnet->named_buffers().contains("layer2.0.bn2.running_mean"));
  auto alexnet = MakeModel("alexnet", ModelShape{3, 1000, 224, 224});
  const auto alexnet_params = alexnet->named_parameters();
  for (const char* name : {"features.0.weight", "features.10.bias", "classifier.1.weight",
                           "classifier.6.weight"}) {
    EXPECT_TRUE(alexnet_params.contains(name)) << name;
  }
  auto vgg = MakeModel("vgg11", ModelShape{3, 10, 32, 32});
  EXPECT_TRUE(vgg->named_parameters().contains("features.1.weight"));  // the first BatchNorm2d
  EXPECT_TRUE(vgg->named_parameters().contains("classifier.weight"));
}

}  // namespace
}  // namespace mgpu
