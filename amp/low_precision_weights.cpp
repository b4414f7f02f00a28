#include "amp/low_precision_weights.h"

namespace mgpu {

namespace nn = torch::nn;

std::unique_ptr<LowPrecisionWeights> LowPrecisionWeights::Of(nn::Module& model, torch::ScalarType dtype) {
  std::vector<Slot> slots;
  auto add = [&](torch::Tensor& member) {
    if (!member.defined() || !member.requires_grad() || member.scalar_type() != torch::kFloat) return;
    torch::NoGradGuard no_grad;
    Slot slot{&member, member, torch::empty_like(member, member.options().dtype(dtype)), torch::Tensor()};
    slot.copy.requires_grad_(true);
    slots.push_back(std::move(slot));
  };
  for (const auto& module : model.modules(/*include_self=*/true)) {
    if (auto* conv = module->as<nn::Conv2d>()) {
      add(conv->weight);  // not the bias: VGG's is folded into its batch norm, in float32
    } else if (auto* linear = module->as<nn::Linear>()) {
      add(linear->weight);
      add(linear->bias);
    }
  }
  if (slots.empty()) return nullptr;
  return std::unique_ptr<LowPrecisionWeights>(new LowPrecisionWeights(std::move(slots)));
}

LowPrecisionWeights::LowPrecisionWeights(std::vector<Slot> slots) : slots_(std::move(slots)) {}

LowPrecisionWeights::InForward::InForward(LowPrecisionWeights& weights) : weights_(weights) {
  std::vector<torch::Tensor> copies, parameters;
  for (const Slot& slot : weights_.slots_) copies.push_back(slot.copy), parameters.push_back(slot.parameter);
  {
    torch::NoGradGuard no_grad;
    torch::_foreach_copy_(copies, parameters);
  }
  for (Slot& slot : weights_.slots_) *slot.member = slot.copy;
}

LowPrecisionWeights::InForward::~InForward() {
  for (Slot& slot : weights_.slots_) *slot.member = slot.parameter;
}

void LowPrecisionWeights::CollectGradients() {
  std::vector<torch::Tensor> gradients, copies_gradients;
  for (Slot& slot : slots_) {
    if (!slot.copy.grad().defined()) continue;
    if (!slot.gradient.defined()) slot.gradient = torch::empty_like(slot.parameter);
    gradients.push_back(slot.gradient);
    copies_gradients.push_back(slot.copy.grad());
    slot.parameter.mutable_grad() = slot.gradient;
  }
  if (gradients.empty()) return;
  {
    torch::NoGradGuard no_grad;
    torch::_foreach_copy_(gradients, copies_gradients);
  }
  for (Slot& slot : slots_) slot.copy.mutable_grad() = torch::Tensor();
}

void LowPrecisionWeights::ForEachPair(
    const std::function<void(const torch::Tensor&, const torch::Tensor&)>& visit) const {
  for (const Slot& slot : slots_) visit(slot.parameter, slot.copy);
}

}  // namespace mgpu
