#include "worker/worker_status.h"

#include "common/status.h"

namespace mgpu {

WorkerStatus& WorkerStatus::Current() {
  static WorkerStatus status;
  return status;
}

void WorkerStatus::SetPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = phase;
  progress_at_ = Clock::now();
}

void WorkerStatus::SetStep(int64_t step, int64_t epoch) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  epoch_ = epoch;
  progress_at_ = Clock::now();
  if (!stop_reason_.empty()) throw Error(ExitCode::kFailure, stop_reason_);
}

void WorkerStatus::StopTraining(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_reason_ = reason;
}

void WorkerStatus::PublishMetrics(const StepMetrics& metrics) {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_ = metrics;
  metrics_sent_ = false;
}

void WorkerStatus::WatchCollectives(const Communicator* communicator) {
  std::lock_guard<std::mutex> lock(mutex_);
  communicator_ = communicator;
}

WorkerStatus::Snapshot WorkerStatus::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  Snapshot snapshot;
  snapshot.step = step_;
  snapshot.epoch = epoch_;
  snapshot.phase = phase_;
  snapshot.seconds_since_progress = std::chrono::duration<double>(Clock::now() - progress_at_).count();
  if (!metrics_sent_) snapshot.metrics = metrics_;
  if (communicator_ != nullptr) snapshot.collective = communicator_->OldestPendingCollective();
  metrics_sent_ = true;
  return snapshot;
}

}  // namespace mgpu
