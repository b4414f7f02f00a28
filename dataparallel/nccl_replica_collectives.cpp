// The "nccl" ReplicaCollectives: one NCCL communicator per GPU of this process (ncclCommInitAll),
// driven from one thread, so every call is wrapped in ncclGroupStart/ncclGroupEnd as NCCL
// requires when one thread manages several devices.
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

  void ReduceToPrimary(const std::vector<std::vector<torch::Tensor>>& buffers) override {
    MGPU_DP_NCCL_CHECK(ncclGroupStart(), "gradient reduction");
    for (size_t r = 0; r < devices_.size(); ++r) {
      for (const torch::Tensor& group : buffers[r]) {
        // In place on the primary (root); the other replicas only send.
        const ncclDataType_t type = NcclDataType(group.scalar_type(), "--mode dp gradient reduction");
        MGPU_DP_NCCL_CHECK(ncclReduce(group.data_ptr(), group.data_ptr(), static_cast<size_t>(group.numel()), type,
                                      ncclSum, /*root=*/0, comms_[r], Stream(r)),
                           "gradient reduction");
      }
    }
    MGPU_DP_NCCL_CHECK(ncclGroupEnd(), "gradient reduction");
  }

  void BroadcastFromPrimary(const std::vector<std::vector<torch::Tensor>>& buffers) override {
    MGPU_DP_NCCL_CHECK(ncclGroupStart(), "parameter broadcast");
    for (size_t r = 0; r < devices_.size(); ++r) {
      for (const torch::Tensor& group : buffers[r]) {
        MGPU_DP_NCCL_CHECK(ncclBroadcast(group.data_ptr(), group.data_ptr(), group.nbytes(), ncclUint8, /*root=*/0,
                                         comms_[r], Stream(r)),
                           "parameter broadcast");
      }
    }
    MGPU_DP_NCCL_CHECK(ncclGroupEnd(), "parameter broadcast");
  }

 private:
  cudaStream_t Stream(size_t replica) const {
    return c10::cuda::getCurrentCUDAStream(devices_[replica].index()).stream();
  }

  std::vector<torch::Device> devices_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

std::unique_ptr<ReplicaCollectives> MakeNcclReplicaCollectives(const std::vector<torch::Device>& devices) {
  return std::make_unique<NcclReplicaCollectives>(devices);
}

}  // namespace mgpu
