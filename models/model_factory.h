// Builds a model by name for a data set's shape: one of the built-in architectures, or the user's
// own model, named by a prefixed --model value kept verbatim (paths are case-sensitive):
//   torchscript:PATH        a module saved from Python by torch.jit.script/trace (torchscript_model.h)
//   plugin:LIB.so:NAME      the factory mgpu_model_NAME of a C++ plugin library (model_plugin.h)
// A user's model is checked before it is trained: it must have parameters, and a (2, C, H, W)
// batch of zeros must come out as (2, classes) logits.
//
// Parameter and buffer names are torchvision's for resnet18/34/50, vgg11/13/16/19 (its *_bn
// variants: mgpu's VGG always has batch norm) and alexnet, so the state dict a run exports
// (worker/state_dict_export.h) loads into the torchvision model of the same architecture.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/model_names.h"
#include "models/classifier.h"

namespace mgpu {

struct ModelShape {
  int64_t in_channels = 1;
  int64_t num_classes = 10;
  int64_t height = 28;
  int64_t width = 28;
};

// Throws BadInputError for an unknown name, a shape the model cannot take, or a user's model
// that cannot be loaded or fails the check above (the message names `name`, the file and a fix).
std::shared_ptr<Classifier> MakeModel(const std::string& name, const ModelShape& shape);

}  // namespace mgpu
