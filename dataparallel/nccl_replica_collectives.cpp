// The "nccl" ReplicaCollectives: one NCCL communicator per GPU of this process (ncclCommInitAll),
// each driven by its replica's own thread, as NCCL allows for separate communicators; a part
// with several tensors is one group on that communicator, so it is one launch.
#include <mutex>
#include <shared_mutex>

#include <cuda_runtime.h>
#include <nccl.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

#include "dataparallel/replica_collectives.h"
#include "ddp/communicator.h"
#include "ddp/nccl_types.h"

namespace mgpu {
namespace {

#define MGPU_DP_NCCL_CHECK(call, what)                                                                       \
  do {                                                                                                       \
    const ncclResult_t result_ = (call);                                                                     \
    if (result_ != ncclSuccess) {                                                                            \
      throw CollectiveError(fmt::format("--mode dp {}: {}:{}: {} failed: {} (last NCCL error: {})", what,     \
                                        __FILE__, __LINE__, #call, ncclGetErrorString(result_),              \
                                        ncclGetLastError(nullptr)));                                         \
    }                                                                                                        \
  } while (0)

class NcclReplicaCollectives : public ReplicaCollectives {
 public:
  explicit NcclReplicaCollectives(const std::vector<torch::Device>& devices) : devices_(devices) {
    std::vector<int> indices;
    for (const auto& device : devices_) indices.push_back(device.index());
    comms_.resize(devices_.size());
    MGPU_DP_NCCL_CHECK(ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), indices.data()),
                       "setting up one NCCL communicator per replica");
  }

  ~NcclReplicaCollectives() override {
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommDestroy(comm);
    }
  }

  std::string name() const override { return "nccl"; }

  void Reduce(size_t replica, const std::vector<torch::Tensor>& tensors) override {
    std::shared_lock<std::shared_mutex> not_aborting(abort_mutex_);
    ncclComm_t comm = Comm(replica, "gradient reduction");
    MGPU_DP_NCCL_CHECK(ncclGroupStart(), "gradient reduction");
    for (const torch::Tensor& tensor : tensors) {
      // In place on the primary (root); the other replicas only send.
      const ncclDataType_t type = NcclDataType(tensor.scalar_type(), "--mode dp gradient reduction");
      MGPU_DP_NCCL_CHECK(ncclReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()), type,
                                    ncclSum, /*root=*/0, comm, Stream(replica)),
                         "gradient reduction");
    }
    MGPU_DP_NCCL_CHECK(ncclGroupEnd(), "gradient reduction");
  }

  void Broadcast(size_t replica, const std::vector<torch::Tensor>& tensors) override {
    std::shared_lock<std::shared_mutex> not_aborting(abort_mutex_);
    ncclComm_t comm = Comm(replica, "parameter broadcast");
    MGPU_DP_NCCL_CHECK(ncclGroupStart(), "parameter broadcast");
    for (const torch::Tensor& tensor : tensors) {
      MGPU_DP_NCCL_CHECK(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes(), ncclUint8, /*root=*/0,
                                       comm, Stream(replica)),
                         "parameter broadcast");
    }
    MGPU_DP_NCCL_CHECK(ncclGroupEnd(), "parameter broadcast");
  }

  void Abort() override {
    std::unique_lock<std::shared_mutex> no_call_in_flight(abort_mutex_);  // queuing a part never blocks
    if (aborted_) return;
    aborted_ = true;
    // Releases the kernels of the parts already queued, which wait for the failed replica.
    for (ncclComm_t& comm : comms_) {
      if (comm != nullptr) ncclCommAbort(comm);
      comm = nullptr;
    }
  }

 private:
  ncclComm_t Comm(size_t replica, const char* what) const {
    if (aborted_) {
      throw CollectiveError(fmt::format("--mode dp {}: a replica failed, so the communicators were aborted", what));
    }
    return comms_[replica];
  }

  cudaStream_t Stream(size_t replica) const {
    return c10::cuda::getCurrentCUDAStream(devices_[replica].index()).stream();
  }

  std::vector<torch::Device> devices_;
  std::vector<ncclComm_t> comms_;
  std::shared_mutex abort_mutex_;  // shared while a part is queued, exclusive to abort
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<ReplicaCollectives> MakeNcclReplicaCollectives(const std::vector<torch::Device>& devices) {
  return std::make_unique<NcclReplicaCollectives>(devices);
}

}  // namespace mgpu
