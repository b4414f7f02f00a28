// AutocastScope: LibTorch's missing `with torch.autocast(device_type, dtype):`.
//
// While a scope is alive, ops on its device type that autocast lists run in `dtype` (matmul,
// convolution, linear) or float32 (losses such as cross_entropy), whatever their inputs' dtype.
// The constructor saves the thread's autocast state for that device type (enabled flag, dtype,
// cast cache flag), sets the new one and counts one nesting level; the destructor restores what
// it saved and, when the outermost scope exits, clears the cache of casted weights — exactly
// torch.autocast.__enter__/__exit__. Scopes nest; an inner scope with enabled = false turns
// autocast off for a region (e.g. a numerically sensitive op), as torch.autocast(enabled=False).
//
// Autocast state is thread-local: a scope affects only the thread that created it. Every
// thread that runs the model's forward pass needs its own scope; backward needs none (autograd
// replays the casts recorded in forward).
#pragma once

#include <torch/torch.h>

namespace mgpu {

class AutocastScope {
 public:
  // device_type: torch::kCUDA or torch::kCPU. dtype: kHalf or kBFloat16 (CPU and CUDA both
  // accept either in LibTorch 2.11).
  AutocastScope(c10::DeviceType device_type, torch::ScalarType dtype, bool enabled = true,
                bool cache_enabled = true);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
  torch::ScalarType previous_dtype_;
  bool previous_cache_enabled_;
};

}  // namespace mgpu
