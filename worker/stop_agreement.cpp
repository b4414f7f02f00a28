#include "worker/stop_agreement.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include "worker/stop_signal.h"

namespace mgpu {

StopAgreement::StopAgreement(Communicator* communicator, const torch::Device& device)
    : communicator_(communicator && communicator->size() > 1 ? communicator : nullptr),
      device_(communicator_ && communicator_->backend() == "nccl" ? device : torch::Device(torch::kCPU)),
      lagged_(device_.is_cuda()) {}

void StopAgreement::Decide(const torch::Tensor& slots) {
  const torch::Tensor cpu = slots.to(torch::kCPU, torch::kInt32).contiguous();
  const int32_t* signal = cpu.data_ptr<int32_t>();
  for (int rank = 0; rank < cpu.numel(); ++rank) {
    if (signal[rank] != 0) {
      agreed_ = StopRequest{signal[rank], rank};
      return;
    }
  }
}

std::optional<StopRequest> StopAgreement::AtStepBoundary() {
  if (agreed_) return agreed_;
  const int received = ReceivedStopSignal();
  if (!communicator_) {
    if (received != 0) agreed_ = StopRequest{received, 0};
    return agreed_;
  }
  torch::Tensor slots = torch::zeros({communicator_->size()}, torch::TensorOptions().dtype(torch::kInt32));
  slots[communicator_->rank()] = received;
  slots = slots.to(device_);  // (world) int32
  communicator_->AllReduceSum(slots, "stop-signal agreement")->Wait();
  if (!lagged_) {
    Decide(slots);
    return agreed_;
  }
  // On the device: queue the copy of this call's result, and read the previous call's.
  InFlight next{torch::empty({slots.numel()}, torch::TensorOptions().dtype(torch::kInt32).pinned_memory(true)),
                c10::Event(device_.type())};
  next.host.copy_(slots, /*non_blocking=*/true);
  next.copied.record(c10::impl::VirtualGuardImpl(device_.type()).getStream(device_));
  in_flight_.push_back(std::move(next));
  if (in_flight_.size() > 1) {
    in_flight_.front().copied.synchronize();
    Decide(in_flight_.front().host);
    in_flight_.erase(in_flight_.begin());
  }
  return agreed_;
}

}  // namespace mgpu
