// A model the user saved from Python with torch.jit.script or torch.jit.trace, trained as any
// built-in model (`--model torchscript:PATH`).
//
// The wrapper registers the script module's own parameter and buffer tensors, under a tree of
// submodules that mirrors the script module's, so its named_parameters() and named_buffers() are
// the script module's names ("features.0.weight") and the very same tensors. Everything that
// works on a Classifier's tensors in place (to(), precision casts, the optimizer, DDP's bucket
// views, dp's flat state, checkpoints, CUDA graphs) therefore updates what the script module
// computes with. train()/eval() reach the script module too (dropout, batch norm).
//
// The script module's forward must take one (B, C, H, W) float tensor and return the
// (B, classes) logits; model_factory.cpp checks that once before training.
#pragma once

#include <string>

#include <torch/script.h>

#include "models/classifier.h"

namespace mgpu {

class TorchScriptClassifier : public Classifier {
 public:
  // Loads the archive at `path` onto the CPU. `spec` is the --model value, for messages. Throws
  // BadInputError when the file is missing, unreadable, not a TorchScript archive, or the module
  // has no forward method.
  TorchScriptClassifier(const std::string& path, const std::string& spec);

  torch::Tensor forward(torch::Tensor images) override;
  void train(bool on = true) override;

 private:
  torch::jit::Module module_;
};

}  // namespace mgpu
