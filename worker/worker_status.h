// What this worker process is doing right now: its step, epoch, phase and latest metrics row.
// The training thread writes it (a few calls in the trainer, and RunOutputs::AppendStep); the
// coordinator client's heartbeat thread reads it, so a launcher can say where a rank is stuck.
// One instance per process (Current()), since one process is one rank. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include <spdlog/logger.h>

#include "ddp/communicator.h"
#include "worker/run_outputs.h"

namespace mgpu {

class WorkerStatus {
 public:
  static WorkerStatus& Current();

  // A new phase ("joining ranks", "loading data", "training", "evaluating", "finishing").
  void SetPhase(const std::string& phase);
  // After every optimizer step: cheap (a mutex and a clock read). Throws mgpu::Error (exit code
  // 1) with the reason once StopTraining was called, so training ends at a step boundary.
  void SetStep(int64_t step, int64_t epoch);
  // Any thread: the training thread is to stop at its next step with `reason` as its error (the
  // coordinator client's heartbeat thread calls it when the launcher stopped answering).
  void StopTraining(const std::string& reason);
  // A metrics row, sent with the next heartbeat.
  void PublishMetrics(const StepMetrics& metrics);
  // Heartbeats report `communicator`'s oldest outstanding collective from now on; nullptr stops
  // that. The communicator must outlive the registration (see CollectiveWatch).
  void WatchCollectives(const Communicator* communicator);

  struct Snapshot {
    int64_t step = 0;
    int64_t epoch = 0;
    std::string phase;
    double seconds_since_progress = 0;     // since the step or the phase last changed
    std::optional<StepMetrics> metrics;    // a row not handed out before
    std::optional<PendingCollective> collective;  // the oldest collective not yet complete
  };
  // The current state; hands out a new metrics row only once.
  Snapshot Take();

 private:
  using Clock = std::chrono::steady_clock;
  std::mutex mutex_;
  int64_t step_ = 0;
  int64_t epoch_ = 0;
  std::string phase_ = "starting";
  Clock::time_point progress_at_ = Clock::now();
  std::optional<StepMetrics> metrics_;
  bool metrics_sent_ = true;
  const Communicator* communicator_ = nullptr;
  std::string stop_reason_;  // set: SetStep throws it
};

// Watches a communicator's collectives for the heartbeats while in scope.
class CollectiveWatch {
 public:
  explicit CollectiveWatch(const Communicator* communicator) { WorkerStatus::Current().WatchCollectives(communicator); }
  ~CollectiveWatch() { WorkerStatus::Current().WatchCollectives(nullptr); }
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;
};

}  // namespace mgpu
