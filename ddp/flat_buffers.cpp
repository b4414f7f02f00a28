#include "ddp/flat_buffers.h"

namespace mgpu {

FlatBuffers::FlatBuffers(const std::vector<torch::Tensor>& like, torch::Device device) : views_(like.size()) {
  std::vector<torch::ScalarType> dtypes;
  for (size_t k = 0; k < like.size(); ++k) {
    const auto dtype = like[k].scalar_type();
    size_t g = 0;
    while (g < dtypes.size() && dtypes[g] != dtype) ++g;
    if (g == dtypes.size()) {
      dtypes.push_back(dtype);
      members_.emplace_back();
    }
    members_[g].push_back(k);
  }
  for (size_t g = 0; g < dtypes.size(); ++g) {
    int64_t numel = 0;
    for (size_t k : members_[g]) numel += like[k].numel();
    groups_.push_back(torch::zeros({numel}, torch::TensorOptions().dtype(dtypes[g]).device(device)));
    int64_t offset = 0;
    for (size_t k : members_[g]) {
      const torch::Tensor& t = like[k];
      // With the tensor's strides where it is dense but not contiguous (channels-last weights),
      // so that a view set as a parameter's data keeps its layout.
      views_[k] = !t.is_contiguous() && t.is_non_overlapping_and_dense()
                      ? groups_[g].as_strided(t.sizes(), t.strides(), offset)
                      : groups_[g].narrow(0, offset, t.numel()).view(t.sizes());
      offset += like[k].numel();
    }
  }
}

void FlatBuffers::Pack(const std::vector<torch::Tensor>& sources) {
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<torch::Tensor> targets, flat;
    bool strided = false;
    for (size_t k : members_[g]) {
      targets.push_back(views_[k]);
      flat.push_back(sources[k].detach());
      strided = strided || !views_[k].is_contiguous();
    }
    if (strided) {
      at::_foreach_copy_(targets, flat);  // element by element, whatever the layouts
    } else {
      for (torch::Tensor& t : flat) t = t.reshape({-1});
      torch::cat_out(groups_[g], flat);
    }
  }
}

void FlatBuffers::Zero() {
  for (auto& group : groups_) group.zero_();
}

bool FlatBuffers::Matches(const FlatBuffers& other) const {
  if (groups_.size() != other.groups_.size() || members_ != other.members_) return false;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (groups_[g].scalar_type() != other.groups_[g].scalar_type() || groups_[g].numel() != other.groups_[g].numel()) {
      return false;
    }
  }
  for (size_t k = 0; k < views_.size(); ++k) {
    if (views_[k].sizes() != other.views_[k].sizes() || views_[k].strides() != other.views_[k].strides()) return false;
  }
  return true;
}

}  // namespace mgpu
