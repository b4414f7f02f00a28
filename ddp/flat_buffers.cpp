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
      views_[k] = groups_[g].narrow(0, offset, like[k].numel()).view(like[k].sizes());
      offset += like[k].numel();
    }
  }
}

void FlatBuffers::Pack(const std::vector<torch::Tensor>& sources) {
  torch::NoGradGuard no_grad;
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<torch::Tensor> flat;
    flat.reserve(members_[g].size());
    for (size_t k : members_[g]) flat.push_back(sources[k].detach().reshape({-1}));
    torch::cat_out(groups_[g], flat);
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
    if (views_[k].sizes() != other.views_[k].sizes()) return false;
  }
  return true;
}

}  // namespace mgpu
