// An activation that two consumers read (a ResNet block's output: the next block's first conv and
// its shortcut; the ImageNet stem's max-pool: layer1's first conv and its projection), as two
// tensors of one storage (`second` an alias of `first`: in-place changes to either show in both),
// so that each consumer's gradient reaches the kernel that made it separately (BatchNormActForked,
// MaxPoolForked). The kernels' backward adds the two as it loads them, rounded as ATen's add rounds
// them, instead of reading a sum that the autograd engine would write in a pass of its own: at
// bf16, those sums were 6% of ResNet-50's step on an H100. Where the kernels do not apply, both
// are the same tensor.
#pragma once

#include <torch/torch.h>

namespace mgpu {

struct ForkedActivation {
  torch::Tensor first, second;
};

}  // namespace mgpu
