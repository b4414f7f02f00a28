// FlatBuffers: a list of tensors (a model's parameters, their gradients, its buffers) laid out
// in one contiguous buffer per dtype, so that one collective or one copy moves a whole group.
//
// views()[k] has the shape of tensors[k] and aliases its group's buffer; where tensors[k] is
// dense but not contiguous (a channels-last convolution weight), the view has its strides too,
// as the buckets of PyTorch's DDP reducer do. Every replica of a model lists its tensors in the
// same order with the same shapes, strides and dtypes, so the groups of two replicas line up
// element for element (Matches checks it).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

class FlatBuffers {
 public:
  // Zero-filled buffers on `device` with the shapes, dense strides and dtypes of `like`.
  FlatBuffers(const std::vector<torch::Tensor>& like, torch::Device device);

  const std::vector<torch::Tensor>& groups() const { return groups_; }  // (numel) per dtype
  const std::vector<torch::Tensor>& views() const { return views_; }

  // Copies `sources` (same shapes, dtypes and device as the views) into the buffers: one
  // concatenation kernel per group.
  void Pack(const std::vector<torch::Tensor>& sources);
  void Zero();
  // Whether `other` has the same groups (members, dtypes and sizes) and views (shapes, strides).
  bool Matches(const FlatBuffers& other) const;

 private:
  std::vector<torch::Tensor> groups_;
  std::vector<torch::Tensor> views_;
  std::vector<std::vector<size_t>> members_;  // per group: indices into views_
};

}  // namespace mgpu
