#include "models/model_factory.h"

#include <fmt/format.h>

#include "common/status.h"
#include "models/alexnet.h"
#include "models/lenet.h"
#include "models/plugin_model.h"
#include "models/resnet.h"
#include "models/torchscript_model.h"
#include "models/vgg.h"

namespace mgpu {
namespace {

bool StartsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The last non-empty line of an error: for an error inside TorchScript code, the error itself
// after the interpreter's traceback.
std::string LastLine(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.substr(text.rfind('\n') + 1);
}

std::string ShapeText(const torch::IntArrayRef& sizes) { return fmt::format("({})", fmt::join(sizes, ", ")); }

// The checks a user's model passes before training: parameters to train, and logits of the
// right shape for a (2, C, H, W) batch of zeros, computed on the CPU in eval mode without
// gradients (so batch-norm statistics are not touched).
void CheckUserModel(Classifier& model, const ModelShape& shape, const std::string& name) {
  if (model.parameters().empty()) {
    throw BadInputError(fmt::format("--model {}: the module has no parameters, so there is nothing to train; "
                                    "register its layers as submodules (in Python: attributes of the nn.Module "
                                    "that is scripted)", name));
  }
  constexpr int64_t kProbeBatch = 2;
  const std::vector<int64_t> input{kProbeBatch, shape.in_channels, shape.height, shape.width};
  const std::vector<int64_t> expected{kProbeBatch, shape.num_classes};
  const bool was_training = model.is_training();
  model.eval();
  torch::Tensor logits;
  std::string failure;
  try {
    torch::NoGradGuard no_grad;
    logits = model.forward(torch::zeros(input));
  } catch (const c10::Error& e) {
    failure = e.what_without_backtrace();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty()) {
    throw BadInputError(fmt::format("--model {}: forward failed on a {} batch of the data's images (expected {} "
                                    "logits): {}; make the model take {}-channel {}x{} images and return one "
                                    "logit per class", name, ShapeText(input), ShapeText(expected),
                                    LastLine(failure), shape.in_channels, shape.height, shape.width));
  }
  model.train(was_training);
  if (logits.sizes() != torch::IntArrayRef(expected) || !logits.is_floating_point()) {
    throw BadInputError(fmt::format("--model {}: forward turns a {} batch of the data's images into {} {} but "
                                    "the data has {} classes, so it must return {} float logits; change the "
                                    "model's last layer (or --dataset)", name, ShapeText(input),
                                    c10::toString(logits.scalar_type()), ShapeText(logits.sizes()),
                                    shape.num_classes, ShapeText(expected)));
  }
}

std::shared_ptr<Classifier> MakeUserModel(const std::string& name, const ModelShape& shape) {
  std::shared_ptr<Classifier> model;
  if (StartsWith(name, kTorchScriptPrefix)) {
    model = std::make_shared<TorchScriptClassifier>(name.substr(sizeof(kTorchScriptPrefix) - 1), name);
  } else {
    // plugin:LIB:NAME; the library's path may itself contain ':', a factory's name may not.
    const std::string rest = name.substr(sizeof(kPluginPrefix) - 1);
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
      throw BadInputError(fmt::format("--model {}: a plugin is named plugin:LIB.so:NAME (the library's path, then "
                                      "the NAME of its factory mgpu_model_NAME)", name));
    }
    model = MakePluginModel(rest.substr(0, colon), rest.substr(colon + 1), shape, name);
  }
  CheckUserModel(*model, shape, name);
  return model;
}

}  // namespace

int64_t CountParameters(torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

std::shared_ptr<Classifier> MakeModel(const std::string& name, const ModelShape& shape) {
  if (IsUserModel(name)) return MakeUserModel(name, shape);
  const auto [channels, classes, height, width] = shape;
  if (name == "lenet") return std::make_shared<LeNet>(channels, classes, height, width);
  if (name == "alexnet") return std::make_shared<AlexNet>(channels, classes, height, width);
  for (const int depth : {11, 13, 16, 19}) {
    if (name == "vgg" + std::to_string(depth)) {
      return std::make_shared<Vgg>(depth, channels, classes, height, width);
    }
  }
  for (const int depth : {18, 34, 50}) {
    if (name == "resnet" + std::to_string(depth)) {
      return std::make_shared<ResNet>(depth, channels, classes, height, width);
    }
  }
  throw BadInputError(fmt::format("unknown model '{}'; available: {}", name,
                                  fmt::join(ModelNames(), ", ")));
}

}  // namespace mgpu
