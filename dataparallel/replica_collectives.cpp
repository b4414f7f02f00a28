#include "dataparallel/replica_collectives.h"

#include <condition_variable>
#include <mutex>

#include "ddp/communicator.h"

namespace mgpu {
namespace {

class CopyCollectives : public ReplicaCollectives {
 public:
  explicit CopyCollectives(size_t replicas) : replicas_(replicas), posted_(replicas, nullptr) {}

  std::string name() const override { return "copy"; }

  void Reduce(size_t replica, const std::vector<torch::Tensor>& tensors) override {
    Meet(replica, tensors);
    if (replica == 0) {
      torch::NoGradGuard no_grad;
      for (size_t r = 1; r < replicas_; ++r) {
        for (size_t t = 0; t < tensors.size(); ++t) {
          tensors[t].add_((*posted_[r])[t].to(tensors[t].device(), /*non_blocking=*/true));
        }
      }
    }
    Meet(replica, tensors);  // the others' tensors stay as they were until replica 0 has read them
  }

  void Broadcast(size_t replica, const std::vector<torch::Tensor>& tensors) override {
    Meet(replica, tensors);
    if (replica != 0) {
      torch::NoGradGuard no_grad;
      for (size_t t = 0; t < tensors.size(); ++t) tensors[t].copy_((*posted_[0])[t], /*non_blocking=*/true);
    }
    Meet(replica, tensors);  // replica 0 changes nothing until every copy is done
  }

  void Abort() override {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    met_.notify_all();
  }

 private:
  // A barrier of all replicas; each posts its tensors for the others to read until the next.
  void Meet(size_t replica, const std::vector<torch::Tensor>& tensors) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (aborted_) throw CollectiveError("--mode dp: a replica failed, so the others stopped waiting for it");
    posted_[replica] = &tensors;
    const uint64_t round = round_;
    if (++arrived_ == replicas_) {
      arrived_ = 0;
      ++round_;
      met_.notify_all();
      return;
    }
    met_.wait(lock, [&] { return round_ != round || aborted_; });
    if (round_ == round) throw CollectiveError("--mode dp: a replica failed, so the others stopped waiting for it");
  }

  const size_t replicas_;
  std::mutex mutex_;
  std::condition_variable met_;
  std::vector<const std::vector<torch::Tensor>*> posted_;  // per replica, valid until the next Meet
  size_t arrived_ = 0;
  uint64_t round_ = 0;
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<ReplicaCollectives> MakeReplicaCollectives(const std::vector<torch::Device>& devices) {
#ifdef MGPU_DP_WITH_NCCL
  if (devices.size() > 1 && devices.front().is_cuda()) return MakeNcclReplicaCollectives(devices);
#endif
  return std::make_unique<CopyCollectives>(devices.size());
}

}  // namespace mgpu
