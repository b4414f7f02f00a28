#include "dataparallel/replica_collectives.h"

namespace mgpu {
namespace {

class CopyCollectives : public ReplicaCollectives {
 public:
  std::string name() const override { return "copy"; }

  void ReduceToPrimary(const std::vector<std::vector<torch::Tensor>>& buffers) override {
    torch::NoGradGuard no_grad;
    for (size_t r = 1; r < buffers.size(); ++r) {
      for (size_t g = 0; g < buffers[0].size(); ++g) {
        buffers[0][g].add_(buffers[r][g].to(buffers[0][g].device(), /*non_blocking=*/true));
      }
    }
  }

  void BroadcastFromPrimary(const std::vector<std::vector<torch::Tensor>>& buffers) override {
    torch::NoGradGuard no_grad;
    for (size_t r = 1; r < buffers.size(); ++r) {
      for (size_t g = 0; g < buffers[0].size(); ++g) buffers[r][g].copy_(buffers[0][g], /*non_blocking=*/true);
    }
  }
};

}  // namespace

std::unique_ptr<ReplicaCollectives> MakeReplicaCollectives(const std::vector<torch::Device>& devices) {
#ifdef MGPU_DP_WITH_NCCL
  if (devices.size() > 1 && devices.front().is_cuda()) return MakeNcclReplicaCollectives(devices);
#endif
  return std::make_unique<CopyCollectives>();
}

}  // namespace mgpu
