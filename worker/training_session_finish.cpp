// TrainingSession's ends: an epoch's (its loss over the ranks, the evaluation, the divergence
// checks, its record and log lines, the schedule's epoch step and checkpoint) and the run's
// (checksums, peak memory, the weights, the summary's last fields).
#include "worker/training_session.h"

#include <cmath>

#include <fmt/format.h>

#include "common/files.h"
#include "common/real.h"
#include "common/status.h"
#include "common/stop_signal.h"
#include "cuda/captured_graph.h"
#include "cuda/device_memory.h"
#include "dataparallel/data_parallel.h"
#include "ddp/distributed_data_parallel.h"
#include "worker/graphed_step.h"
#include "worker/memory_snapshot.h"
#include "worker/state_dict_export.h"

namespace mgpu {
namespace {

constexpr char kStateDictFile[] = "model_state_dict.pt";
// phase_seconds' entry of the all-reduces' device time, hidden or not.
constexpr char kCollectivesTotal[] = "collectives_total";

std::map<std::string, double> PhaseMap(const PhaseSeconds& phases) {
  std::map<std::string, double> named;
  for (size_t i = 0; i < kStepPhaseCount; ++i) named[StepPhaseName(static_cast<StepPhase>(i))] = phases.seconds[i];
  return named;
}

// Sum over all parameters of the sum of absolute values, in double precision.
double ParamChecksum(Classifier& model) {
  torch::NoGradGuard no_grad;
  double total = 0;
  for (const auto& p : model.parameters()) total += p.detach().to(torch::kDouble).abs().sum().item<double>();
  return total;
}

// summary.json's record of a run stopped by a signal, and the log line that says how to go on.
void RecordInterruption(const StopRequest& request, int64_t step, const std::string& checkpoint, RunOutputs& outputs,
                        RunSummary& summary) {
  const std::string signal = SignalName(request.signal);
  summary.status = "interrupted";
  summary.exit_code = 128 + request.signal;
  summary.interrupted = InterruptionRecord{signal, request.signal, request.rank, step, checkpoint};
  const std::string received = summary.world_size > 1 ? fmt::format(" (received by rank {})", request.rank) : "";
  if (outputs.writes_shared_files()) {
    outputs.log().warn("{}{} at step {}: checkpoint written to {}, resume with --resume {}", signal, received, step,
                       checkpoint, outputs.folder());
  } else {
    outputs.log().warn("{}{} at step {}: every rank stopped there; rank 0 wrote the checkpoint", signal, received, step);
  }
}

}  // namespace

void TrainingSession::EndEpoch() {
  CheckAllLosses();  // including the steps after the last row (--max-steps)
  const TimelineWindow rest = timeline_->Cut();
  epoch_.phases.device += rest.Seconds();
  epoch_.phases.host += rest.HostSeconds();
  const double train_loss = EpochTrainLoss();
  const double epoch_seconds = SecondsSince(epoch_.start);
  progress_->EndEpoch();

  WorkerStatus::Current().SetPhase("evaluating");
  const auto eval_start = Clock::now();
  const Evaluation eval = Evaluate(*model_, data_.test,
                                   EvaluationOptions{config_.eval_batch_size, config_.eval_max_samples,
                                                     data_.memory ? 0 : static_cast<int>(config_.num_workers),
                                                     precision_, channels_last_},
                                   device_, world_.rank, ranks_);
  const double eval_seconds = SecondsSince(eval_start);
  ReportSkippedImages();
  CheckStillFinite(train_loss, eval);
  RecordEpoch(train_loss, epoch_seconds, eval_seconds, eval);

  // A signal during the epoch's last step or its evaluation stops the run here, unless the run
  // is done.
  std::optional<StopRequest> stop_request = stop_agreement_->AtEpochEnd();  // a collective, on every rank
  if (stop_ || epoch_.epoch + 1 == config_.epochs) stop_request.reset();
  if (epoch_.micro == micro_batches_per_epoch_) {  // a whole epoch, not one cut short by --max-steps
    scheduler_->OnEpochEnd(eval.loss);
    optimizer_->set_lr(scheduler_->lr());
    if (checkpoints_->enabled() || stop_request) {
      epoch_.loss_sum.zero_();
      epoch_.loss_images.zero_();
      const std::string path = WriteCheckpoint(TrainingPosition{epoch_.epoch + 1, step_, 0, 0, 0, {}, {}, {}});
      if (stop_request) interrupted_checkpoint_ = path;
    }
  }
  interrupted_ = stop_request;
}

// The epoch's loss over every rank's images (item() also waits for the device); NaN when every
// step of the epoch was skipped, reported as diverged.
double TrainingSession::EpochTrainLoss() {
  torch::Tensor totals = torch::stack({epoch_.loss_sum, epoch_.loss_images});
  ranks_.Sum(totals, "epoch loss");
  totals = totals.cpu();
  return totals[0].item<double>() / totals[1].item<double>();
}

void TrainingSession::CheckStillFinite(double train_loss, const Evaluation& eval) {
  if (!std::isfinite(train_loss)) {
    RecordScaler();
    throw DivergedError(fmt::format("training loss became {} in epoch {} (step {}){}; lower --lr",
                                    Real{train_loss}, epoch_.epoch + 1, step_,
                                    skip_nonfinite_ ? ": every step of the epoch had a non-finite loss" : ""));
  }
  // Skipping steps keeps non-finite updates out of the weights, but not a model that is broken
  // anyway: weights grown until float16 overflows in the forward pass, or a loss scale that
  // backed off to 0 and can never grow again. Such a run would otherwise end with exit 0.
  if (std::isfinite(eval.loss) && !(scaler_->enabled() && scaler_->scale() == 0)) return;
  RecordScaler();
  const std::string skipped = fmt::format("{} steps skipped so far", summary_.skipped_steps);
  throw DivergedError(
      std::isfinite(eval.loss)
          ? fmt::format("the dynamic loss scale fell to 0 in epoch {} (step {}, {}): every scaled gradient "
                        "overflowed, and a scale of 0 cannot grow again; lower --lr, or use --precision amp-bf16",
                        epoch_.epoch + 1, step_, skipped)
          : fmt::format("test loss became {} after epoch {} (step {}, {}): the model's outputs are no longer "
                        "finite; lower --lr{}", Real{eval.loss}, epoch_.epoch + 1, step_, skipped,
                        ModelDtype(precision_) == torch::kHalf || AutocastDtype(precision_) == torch::kHalf
                            ? ", or use --precision amp-bf16 (float16's range ends at 65504)" : ""));
}

// The epoch's record in summary.json and TensorBoard, and its log lines.
void TrainingSession::RecordEpoch(double train_loss, double seconds, double eval_seconds, const Evaluation& eval) {
  // The images this process trained: a resumed epoch's time starts at the checkpoint.
  const double images_per_second =
      static_cast<double>((epoch_.images_seen - epoch_.images_before) * world_.world_size) / seconds;
  const double comm_wait = epoch_.phases.device[StepPhase::kExposedComm];
  std::map<std::string, double> phase_seconds = PhaseMap(epoch_.phases.device);
  // All-reduces (and the evaluation's) in device time, hidden or not: with exposed_comm, how much
  // of the communication backward hid. Not with a graphed step: its replayed all-reduces are in
  // the graph's time, not in this.
  const bool collectives_timed = communicator_ && !(graphed_ && graphed_->captured());
  if (const auto collective_seconds = collectives_timed ? communicator_->CompletedCollectiveSeconds() : std::nullopt) {
    phase_seconds[kCollectivesTotal] = *collective_seconds - epoch_.collective_seconds_before;
  }
  summary_.epochs_detail.push_back(EpochRecord{epoch_.epoch, train_loss, seconds, images_per_second, epoch_.data_wait,
                                               seconds - epoch_.data_wait - comm_wait, comm_wait, phase_seconds,
                                               PhaseMap(epoch_.phases.host), epoch_.steps, eval_seconds, eval.loss,
                                               eval.accuracy});
  summary_.test_loss = eval.loss;
  summary_.test_accuracy = eval.accuracy;
  summary_.eval_samples = eval.samples;
  summary_.per_class_accuracy = eval.per_class_accuracy;
  outputs_.AddScalar("train/epoch_loss", train_loss, step_);
  outputs_.AddScalar("test/loss", eval.loss, step_);
  outputs_.AddScalar("test/accuracy", eval.accuracy, step_);
  // One process on one device communicates nothing: no all-reduce time to speak of.
  const std::string comm_text =
      communicator_ || data_parallel_ ? fmt::format(", {:.1f} s for all-reduces", comm_wait) : "";
  log_.info("epoch {}/{}: train loss {:.4f}, test loss {:.4f}, test accuracy {:.2f}%, {:.1f} s "
            "({:.1f} s waiting for data{}), {:.0f} img/s",
            epoch_.epoch + 1, config_.epochs, train_loss, eval.loss, eval.accuracy, seconds, epoch_.data_wait,
            comm_text, images_per_second);
  if (eval.samples < data_.test->size()) {
    log_.info("epoch {}/{}: test loss and accuracy of {} of the {} test images (--eval-max-samples)",
              epoch_.epoch + 1, config_.epochs, eval.samples, data_.test->size());
  }
  LogEpochPhases(phase_seconds);
}

// The epoch's time per step by phase, as the device ran it and (on CUDA) as the host issued it:
// where the host's is about the device's, the steps wait for the host.
void TrainingSession::LogEpochPhases(const std::map<std::string, double>& phase_seconds) {
  const double per_step_ms = 1000.0 / static_cast<double>(std::max<int64_t>(epoch_.steps, 1));
  const bool communicates = communicator_ || data_parallel_;
  auto phases_text = [&](const PhaseSeconds& phases) {
    const std::string comm =
        communicates ? fmt::format(", exposed communication {:.2f} ms", phases[StepPhase::kExposedComm] * per_step_ms)
                     : "";
    return fmt::format("input {:.2f} ms, forward {:.2f} ms, backward {:.2f} ms{}, optimizer {:.2f} ms",
                       phases[StepPhase::kInput] * per_step_ms, phases[StepPhase::kForward] * per_step_ms,
                       phases[StepPhase::kBackward] * per_step_ms, comm, phases[StepPhase::kOptimizer] * per_step_ms);
  };
  const auto collectives_total = phase_seconds.find(kCollectivesTotal);
  const std::string collectives =
      collectives_total != phase_seconds.end()
          ? fmt::format(" (collectives ran {:.2f} ms)", collectives_total->second * per_step_ms)
          : "";
  log_.info("epoch {}/{} per step, {} time: {}{}", epoch_.epoch + 1, config_.epochs,
            device_.is_cuda() ? "device" : "host", phases_text(epoch_.phases.device), collectives);
  if (device_.is_cuda()) {
    log_.info("epoch {}/{} per step, host time: {}", epoch_.epoch + 1, config_.epochs, phases_text(epoch_.phases.host));
  }
}

std::optional<StopRequest> TrainingSession::Finish() {
  WorkerStatus::Current().SetPhase("finishing");
  if (const std::string trace = profiler_->Finish(); !trace.empty()) {
    log_.info("trace of the steps profiled before the run ended written to {}", trace);
  }
  if (memory_snapshot_) memory_snapshot_->Write();
  RecordScaler();
  const double checksum = ParamChecksum(*model_);
  RecordRanks(checksum);
  SaveWeights();
  summary_.steps = step_;
  summary_.final_lr = optimizer_->lr();
  summary_.param_checksum = checksum;
  summary_.total_seconds = SecondsSince(run_start_);
  if (interrupted_) {
    RecordInterruption(*interrupted_, step_, interrupted_checkpoint_, outputs_, summary_);
    return interrupted_;
  }
  summary_.status = "ok";
  // Without loss scaling the scale is 1 throughout: a final scale would say nothing.
  log_.info("done: {} steps in {:.1f} s, test accuracy {:.2f}%, param_checksum {:.6f}, {} steps skipped{}", step_,
            *summary_.total_seconds, summary_.test_accuracy.value_or(std::nan("")), checksum, summary_.skipped_steps,
            scaler_->enabled() ? fmt::format(", final loss scale {}", summary_.final_loss_scale) : "");
  return std::nullopt;
}

// Every rank's checksum, device and peak memory (collectives), and how the mode ran.
void TrainingSession::RecordRanks(double checksum) {
  const std::vector<double> checksums = ranks_.Gather(checksum, "parameter checksums");
  const std::vector<double> peaks = ranks_.Gather(static_cast<double>(DevicePeakMemoryBytes(device_)), "peak memory");
  const std::vector<double> device_indices = ranks_.Gather(device_.is_cuda() ? device_.index() : -1, "devices");
  summary_.devices.clear();
  for (double index : device_indices) summary_.devices.push_back(index < 0 ? "cpu" : fmt::format("cuda:{}", index));
  summary_.peak_memory_bytes.clear();
  for (double peak : peaks) summary_.peak_memory_bytes.push_back(static_cast<int64_t>(peak));
  if (world_.world_size > 1) summary_.rank_param_checksums = checksums;
  if (data_parallel_) data_parallel_->Report(summary_);  // every dp device, and dp_timing
  if (graphed_) {
    summary_.cuda_graphs = CudaGraphsRecord{graphed_->captured(), graphed_->replays(), graphed_->eager_steps()};
  }
  if (replicated_) {
    summary_.ddp_bucket_bytes = replicated_->BucketBytes();
    summary_.ddp_buckets_rebuilt = replicated_->rebuilt();
  }
}

// One copy of the weights unless more are asked for: --checkpoint's file is a second name of
// model_state_dict.pt where one file system holds both, and model.pt only with --save-module.
void TrainingSession::SaveWeights() {
  if (config_.save_module && outputs_.writes_shared_files()) torch::save(model_, outputs_.folder() + "/model.pt");
  if (!config_.save_state_dict && checkpoint_path_.empty()) return;
  if (outputs_.writes_shared_files()) {
    const std::string state_dict = SerializeStateDict(*model_, optimizer_->stepped_parameters());
    const std::string state_dict_path = outputs_.folder() + "/" + kStateDictFile;
    if (config_.save_state_dict) WriteFileAtomically(state_dict_path, state_dict);
    if (!checkpoint_path_.empty() && config_.save_state_dict) {
      LinkOrWriteAtomically(state_dict_path, checkpoint_path_, state_dict);
    } else if (!checkpoint_path_.empty()) {
      WriteFileAtomically(checkpoint_path_, state_dict);
    }
  }
  if (config_.save_state_dict) summary_.state_dict_file = kStateDictFile;  // in the output folder
  if (!checkpoint_path_.empty()) summary_.checkpoint_file = checkpoint_path_;
}

}  // namespace mgpu
