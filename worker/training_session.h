// One training process's run as a session with four parts: set-up (data → model → mode →
// precision → batches → schedule, checkpoints and resume), the epochs' steps, each epoch's end
// (its evaluation and record), and the finish (checksums, weights, summary). Train()
// (worker/trainer.h) is
//
//   TrainingSession session(config, world, device, communicator, outputs, summary);
//   return session.Run();
//
// The files: training_session.cpp (the loop and a step), training_session_setup.cpp (set-up),
// training_session_finish.cpp (an epoch's end and the run's). How a step executes (eager, DDP,
// DataParallel, CUDA-graphed) is the StepRunner's business (worker/step_runner.h), not the loop's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "amp/grad_scaler.h"
#include "amp/precision.h"
#include "data/batch_loader.h"
#include "data/datasets.h"
#include "ddp/communicator.h"
#include "ddp/distributed_sampler.h"
#include "ddp/world.h"
#include "report/run_summary.h"
#include "models/model_factory.h"
#include "optim/fused_optimizer.h"
#include "optim/lr_scheduler.h"
#include "worker/checkpoint.h"
#include "worker/deferred_rows.h"
#include "worker/evaluation.h"
#include "worker/progress.h"
#include "worker/rank_group.h"
#include "worker/run_outputs.h"
#include "worker/step_runner.h"
#include "worker/step_timeline.h"
#include "worker/stop_agreement.h"
#include "worker/test_faults.h"
#include "worker/trace_profiler.h"
#include "worker/train_config.h"
#include "worker/worker_status.h"

namespace mgpu {

class BatchSource;
class StepStreamScope;
class DataParallelEngine;
class DistributedDataParallel;
class GpuJpegBatches;
class GraphedTrainStep;
class MemorySnapshot;

class TrainingSession {
 public:
  // Sets the run up as `config` says, in the order data → model → mode → precision → batches →
  // schedule → checkpoints → resume, and logs the start-up table. Throws BadInputError for what
  // cannot run, before any step. `summary` (SummaryFromConfig's record) receives what set-up
  // resolves; it and `outputs` must outlive the session. `communicator` is null outside --mode ddp.
  TrainingSession(const TrainConfig& config, const WorldInfo& world, const torch::Device& device,
                  Communicator* communicator, RunOutputs& outputs, RunSummary& summary);
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Trains to the end: Train's contract (worker/trainer.h). Call once.
  std::optional<StopRequest> Run();

 private:
  using Clock = std::chrono::steady_clock;

  // Wall-clock seconds from `start` to now.
  static double SecondsSince(Clock::time_point start);

  Clock::time_point loop_start_;  // Run()'s first moment: metrics.csv's elapsed_seconds count from it

  // An epoch's step phases, as the device ran them and as the host issued them.
  struct EpochPhases {
    PhaseSeconds device;
    PhaseSeconds host;
  };

  // What the loop counts within an epoch; a resumed epoch starts from its checkpoint's counts.
  struct EpochState {
    int64_t epoch = 0;
    Clock::time_point start;
    double collective_seconds_before = 0;  // the communicator's completed collectives at the start
    double data_wait = 0;                  // seconds the loop waited for batches
    EpochPhases phases;
    int64_t images_seen = 0;    // by this rank, the resumed part included
    int64_t images_before = 0;  // trained before this process's part of the epoch
    int64_t steps = 0;
    int64_t micro = 0;          // micro-batches done
    torch::Tensor step_nonfinite;  // () bool, --on-nonfinite skip: a micro-batch's loss of this step was not finite
    // () double sums over the epoch's steps of loss × images and of images (with skip, the finite ones).
    torch::Tensor loss_sum, loss_images;
    // Since the last metrics row: data wait, steps and images.
    double window_wait = 0;
    int64_t window_steps = 0, window_images = 0;
  };

  // Set-up, in this order (training_session_setup.cpp).
  void CheckBatchFitsWorld();
  void OpenStepStream();
  void SetUpNumerics();
  void OpenData();
  void BuildModel();
  void BuildDataParallel(const ModelShape& shape);
  void BuildStepRunner();
  void BuildBatches();
  void PlanScheduleAndCheckpoints();
  void ResumeFromCheckpoint();
  void LogStartup();
  std::string StepExecution() const;
  void PrepareLoop();

  // The loop (training_session.cpp).
  void StartEpoch(int64_t epoch);
  std::optional<Batch> NextBatch();
  torch::Tensor TrainMicroBatch(const Batch& batch);
  void AccountLoss(const torch::Tensor& loss, int64_t batch_images);
  void FinishStep(const torch::Tensor& loss);
  void AddMetricsRow(const torch::Tensor& loss);
  std::string WriteCheckpoint(TrainingPosition at);
  void WriteCompletedRows(bool wait);
  void CheckAllLosses();
  [[noreturn]] void ThrowDiverged(const NonFiniteLoss& bad, int64_t epoch);
  void RecordScaler();
  void ReportSkippedImages();

  // An epoch's end and the run's (training_session_finish.cpp).
  void EndEpoch();
  double EpochTrainLoss();
  void CheckStillFinite(double train_loss, const Evaluation& eval);
  void RecordEpoch(double train_loss, double seconds, double eval_seconds, const Evaluation& eval);
  void LogEpochPhases(const std::map<std::string, double>& phase_seconds);
  void SaveWeights();
  void RecordRanks(double checksum);
  std::optional<StopRequest> Finish();

  // The run's context.
  const TrainConfig& config_;
  const WorldInfo& world_;
  const torch::Device device_;
  Communicator* const communicator_;
  RunOutputs& outputs_;
  RunSummary& summary_;
  spdlog::logger& log_;
  const TestFaults& faults_;
  const Clock::time_point run_start_;
  const bool ddp_;
  // The steps' stream where it is not the default one (cuda/step_stream.h says when), else null.
  std::unique_ptr<StepStreamScope> step_stream_;
  RankGroup ranks_;
  const CollectiveWatch collective_watch_;  // heartbeats name a collective this rank waits in
  int64_t micro_batch_ = 0;                 // per rank: the global batch / ranks / grad_accum
  Precision precision_ = Precision::kFp32;
  LossScaling loss_scaling_;
  bool skip_nonfinite_ = false;             // --on-nonfinite skip
  std::unique_ptr<MemorySnapshot> memory_snapshot_;

  // Data.
  OpenedDataset data_;
  double load_seconds_ = 0;
  GpuJpegBatches* gpu_decoder_ = nullptr;  // --decode gpu: its fallback counts go to summary.json
  std::string decode_why_;

  // Model, mode and optimizer.
  std::shared_ptr<Classifier> model_;
  bool channels_last_ = false;
  std::string layout_reason_;
  std::unique_ptr<DistributedDataParallel> replicated_;  // --mode ddp
  std::unique_ptr<DataParallelEngine> data_parallel_;    // --mode dp: replicas of model_ on more devices
  std::optional<FusedOptimizer> optimizer_;
  std::optional<GradScaler> scaler_;
  std::unique_ptr<GraphedTrainStep> graphed_;  // --cuda-graphs on one device per process
  std::unique_ptr<StepRunner> runner_;

  // Batches, schedule, checkpoints.
  std::optional<DistributedSampler> sampler_;
  std::optional<BatchLoader> loader_;     // host batches, unless the data set lives on the device
  std::unique_ptr<BatchSource> batches_;  // batches on the training device (--mode dp: on the host)
  int64_t micro_batches_per_epoch_ = 0;
  int64_t steps_per_epoch_ = 0;
  std::optional<LrScheduler> scheduler_;
  std::optional<TrainingParts> parts_;
  std::optional<CheckpointIdentity> identity_;
  std::optional<CheckpointWriter> checkpoints_;
  std::string checkpoint_path_;  // --checkpoint's file, "" for none
  TrainingPosition position_;    // where the run starts: a resumed checkpoint's position, or the beginning

  // The loop's state.
  int64_t log_every_ = 0;
  int64_t total_steps_ = 0;
  std::optional<Progress> progress_;
  std::optional<StepTimeline> timeline_;
  std::optional<StopAgreement> stop_agreement_;
  std::optional<DeferredRows> rows_;  // metrics rows complete a row late (deferred_rows.h)
  std::optional<TraceProfiler> profiler_;
  int64_t step_ = 0;
  bool stop_ = false;                          // --max-steps reached
  std::optional<StopRequest> interrupted_;     // the signal that ended the run, at a step boundary
  std::string interrupted_checkpoint_;         // its checkpoint (on rank 0)
  std::optional<double> last_loss_;            // of the last completed metrics row, for the progress display
  WindowLosses window_losses_;                 // one per micro-batch since the last metrics row
  EpochState epoch_;
};

}  // namespace mgpu
