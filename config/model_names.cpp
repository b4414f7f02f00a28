#include "config/model_names.h"

namespace mgpu {
namespace {

bool StartsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

}  // namespace

const std::vector<std::string>& ModelNames() {
  static const std::vector<std::string> names = {"lenet",    "alexnet",  "vgg11",   "vgg13",
                                                 "vgg16",    "vgg19",    "resnet18", "resnet34",
                                                 "resnet50"};
  return names;
}

bool IsUserModel(const std::string& name) {
  return StartsWith(name, kTorchScriptPrefix) || StartsWith(name, kPluginPrefix);
}

std::string ModelLabel(const std::string& name) {
  if (StartsWith(name, kPluginPrefix)) return "plugin-" + name.substr(name.rfind(':') + 1);
  if (!StartsWith(name, kTorchScriptPrefix)) return name;
  std::string stem = name.substr(name.find_last_of(":/") + 1);
  stem = stem.substr(0, stem.rfind('.'));
  return "torchscript-" + stem;
}

}  // namespace mgpu
