// Autocast's weight casts, batched: a model's Conv2d weights and Linear weights and biases kept as
// bfloat16 (or float16) copies that its forward uses, refreshed from the float32 parameters by one
// multi-tensor copy before each forward, and their gradients copied back into the parameters'
// float32 gradients by one more after backward. Autocast casts each weight in a kernel of its own
// forward and casts its gradient back in another (ResNet-18: 47 kernels, 145 µs of a 4.0 ms step
// on an H100; ResNet-50: 113, 418 µs).
//
// The same bits as autocast: the copies are the casts autocast would make (round to nearest even),
// autocast passes a tensor already in its dtype through, the convolutions' weight gradients are
// computed in the copies' dtype either way, and their cast to float32 is exact. The parameters
// (float32) stay what the optimizer steps, checkpoints save and evaluation uses.
//
// For one micro-batch per step: the copies' gradients are not accumulated across micro-batches.
// Under DDP the reducer takes the copies' gradients instead of CollectGradients
// (DistributedDataParallel::ReceiveGradientThrough, for each pair of ForEachPair).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

class LowPrecisionWeights {
 public:
  // The weights of `model`'s Conv2d and Linear modules (and the Linear biases), as `dtype` copies;
  // null where the model has none.
  static std::unique_ptr<LowPrecisionWeights> Of(torch::nn::Module& model, torch::ScalarType dtype);

  // While alive, the modules' members point at the copies, refreshed from the parameters (one
  // multi-tensor copy); the destructor points them back. Wrap the forward in one.
  class InForward {
   public:
    explicit InForward(LowPrecisionWeights& weights);
    ~InForward();
    InForward(const InForward&) = delete;
    InForward& operator=(const InForward&) = delete;

   private:
    LowPrecisionWeights& weights_;
  };

  // After backward: the copies' gradients into the parameters' gradients (float32 tensors kept
  // from step to step), in one multi-tensor copy; the copies' gradients are then set to none. A
  // copy without a gradient leaves its parameter's gradient as it was.
  void CollectGradients();

  // Calls `visit(parameter, copy)` for every weight that has a copy.
  void ForEachPair(const std::function<void(const torch::Tensor&, const torch::Tensor&)>& visit) const;

  size_t size() const { return slots_.size(); }

 private:
  struct Slot {
    torch::Tensor* member;   // the module's `weight` or `bias`
    torch::Tensor parameter;  // float32, what the member holds outside a forward
    torch::Tensor copy;       // dtype, a leaf that requires grad, parameter's strides
    // float32, parameter's strides: the parameter's grad once collected; made by the first
    // CollectGradients (an eager step, before any capture), so never under DDP, whose buckets
    // take the copies' gradients instead.
    torch::Tensor gradient;
  };
  explicit LowPrecisionWeights(std::vector<Slot> slots);

  std::vector<Slot> slots_;
};

}  // namespace mgpu
