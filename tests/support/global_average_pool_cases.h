// The cases of GlobalAveragePool's specification, on a device: the CPU test and the GPU test run
// them alike.
#pragma once

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "models/global_average_pool.h"

namespace mgpu {

inline void ExpectAdaptiveAvgPoolsBits(const torch::Device& device) {
  torch::manual_seed(17);
  torch::nn::AdaptiveAvgPool2d pool(torch::nn::AdaptiveAvgPool2dOptions(1));
  for (const auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (const bool channels_last : {false, true}) {
      for (const auto& sizes : std::vector<std::vector<int64_t>>{{4, 32, 7, 7}, {3, 24, 4, 4}, {2, 16, 1, 1}, {5, 8, 3, 5}}) {
        SCOPED_TRACE(::testing::Message() << sizes << " " << dtype << (channels_last ? " channels-last" : " NCHW"));
        const auto format = channels_last ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous;
        const torch::Tensor x = torch::randn(sizes).to(device, dtype).contiguous(format);
        const torch::Tensor ours_x = x.clone().requires_grad_(), aten_x = x.clone().requires_grad_();
        const torch::Tensor ours = GlobalAveragePool(ours_x), aten = pool(aten_x).flatten(1);
        ASSERT_EQ(ours.sizes(), aten.sizes());
        EXPECT_TRUE(torch::equal(ours, aten));
        const torch::Tensor gy = torch::randn(aten.sizes()).to(device, dtype);
        ours.backward(gy);
        aten.backward(gy);
        EXPECT_TRUE(torch::equal(ours_x.grad(), aten_x.grad()));
        EXPECT_TRUE(ours_x.grad().is_contiguous(format)) << ours_x.grad().strides();
      }
    }
  }
}

}  // namespace mgpu
