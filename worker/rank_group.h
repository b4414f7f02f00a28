// The ranks of a job as the training loop sees them: sums and gathers over every rank, and a
// group of one where there is no communicator (--mode single, --mode dp).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "ddp/communicator.h"

namespace mgpu {

class RankGroup {
 public:
  // `communicator` may be null: a group of one. Tensors summed and gathered live on `device`.
  RankGroup(Communicator* communicator, const torch::Device& device) : communicator_(communicator), device_(device) {}

  int size() const { return communicator_ ? communicator_->size() : 1; }

  // Sums `tensor` (on the training device) over the ranks, in place, ready to be read on the host;
  // `what` names the collective in stall reports.
  void Sum(torch::Tensor& tensor, const std::string& what) {
    if (communicator_ && size() > 1) communicator_->AllReduceSum(tensor, what)->WaitForHost();
  }

  // Every rank's `value`, in rank order.
  std::vector<double> Gather(double value, const std::string& what) {
    if (!communicator_ || size() == 1) return {value};
    auto options = torch::TensorOptions().dtype(torch::kDouble).device(device_);
    torch::Tensor all = torch::empty({size()}, options);
    communicator_->AllGather(all, torch::full({1}, value, options), what)->WaitForHost();
    all = all.cpu();
    return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + size());
  }

 private:
  Communicator* communicator_;
  torch::Device device_;
};

}  // namespace mgpu
