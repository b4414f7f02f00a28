#include "worker/stop_agreement.h"

#include <algorithm>
#include <cmath>

#include "common/stop_signal.h"

namespace mgpu {

StopAgreement::StopAgreement(Communicator* communicator, const torch::Device& device)
    : communicator_(communicator && communicator->size() > 1 ? communicator : nullptr),
      device_(communicator_ && communicator_->backend() == "nccl" ? device : torch::Device(torch::kCPU)) {}

std::optional<StopRequest> StopAgreement::AtStepBoundary() {
  if (agreed_) return agreed_;
  if (!communicator_) {
    if (const int received = ReceivedStopSignal(); received != 0) agreed_ = StopRequest{received, 0};
    return agreed_;
  }
  ++steps_since_;
  if (--steps_left_ == 0) Agree();
  return agreed_;
}

std::optional<StopRequest> StopAgreement::AtEpochEnd() {
  if (agreed_) return agreed_;
  if (!communicator_) return AtStepBoundary();
  Agree();
  return agreed_;
}

int64_t StopAgreement::StepsUntilNextAgreement() const {
  const double seconds = std::chrono::duration<double>(Clock::now() - agreed_at_).count();
  const double per_step = seconds / static_cast<double>(std::max<int64_t>(steps_since_, 1));
  const double every = std::chrono::duration<double>(kAgreeEvery).count();
  return std::clamp<int64_t>(static_cast<int64_t>(std::floor(every / std::max(per_step, 1e-9))), 1, kMaxStepsBetween);
}

void StopAgreement::Agree() {
  const int size = communicator_->size();
  // Slots 0..size-1: each rank's signal; slot `size`: rank 0's steps until the next agreement.
  torch::Tensor slots = torch::zeros({size + 1}, torch::TensorOptions().dtype(torch::kLong));
  slots[communicator_->rank()] = ReceivedStopSignal();
  if (communicator_->rank() == 0) slots[size] = StepsUntilNextAgreement();
  slots = slots.to(device_);
  communicator_->AllReduceSum(slots, "stop-signal agreement")->WaitForHost();
  slots = slots.cpu();
  const int64_t* value = slots.data_ptr<int64_t>();
  for (int rank = 0; rank < size && !agreed_; ++rank) {
    if (value[rank] != 0) agreed_ = StopRequest{static_cast<int>(value[rank]), rank};
  }
  steps_left_ = value[size];
  steps_since_ = 0;
  agreed_at_ = Clock::now();
}

}  // namespace mgpu
