// TrainingSession's loop: epochs of steps of micro-batches, and what a step does around the
// StepRunner (losses, metrics rows, schedule, progress, checkpoints, stop signals).
#include "worker/training_session.h"

#include <fmt/format.h>

#include "common/real.h"
#include "common/status.h"
#include "data/gpu_jpeg_batches.h"
#include "models/memory_format.h"
#include "worker/graphed_step.h"

namespace mgpu {

double TrainingSession::SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ----------------------------------------------------------------------------
// The training loop. A step is grad_accum micro-batches, then the gradients' reduction and the
// optimizer step; an epoch ends in an evaluation. Every rank runs the same steps.
std::optional<StopRequest> TrainingSession::Run() {
  loop_start_ = Clock::now();
  for (int64_t epoch = position_.epoch; epoch < config_.epochs && !stop_ && !interrupted_; ++epoch) {
    StartEpoch(epoch);
    while (std::optional<Batch> batch = NextBatch()) {      // images (B, C, H, W), labels (B)
      const torch::Tensor loss = TrainMicroBatch(*batch);  // forward + backward; () float32
      const bool step_complete = epoch_.micro % config_.grad_accum == 0 || epoch_.micro == micro_batches_per_epoch_;
      if (!step_complete) continue;
      FinishStep(loss);  // reduce, optimizer step, metrics, schedule, checkpoint, stop signals
      if (stop_ || interrupted_) break;
    }
    if (interrupted_) {  // the epoch's evaluation is not worth the wait
      progress_->EndEpoch();
      break;
    }
    EndEpoch();  // evaluate, record, schedule, checkpoint
  }
  return Finish();
}
// ----------------------------------------------------------------------------

void TrainingSession::StartEpoch(int64_t epoch) {
  epoch_ = EpochState{};
  epoch_.epoch = epoch;
  epoch_.start = Clock::now();
  epoch_.collective_seconds_before = communicator_ ? communicator_->CompletedCollectiveSeconds().value_or(0) : 0;
  // A resumed epoch skips the micro-batches done before the checkpoint: the rest are the same.
  const bool resumed = epoch == position_.epoch && position_.micro_batches > 0;
  std::vector<int64_t> indices = sampler_->EpochIndices(epoch);
  if (resumed) {
    indices.erase(indices.begin(), indices.begin() + std::min<int64_t>(position_.micro_batches * micro_batch_,
                                                                       static_cast<int64_t>(indices.size())));
  }
  batches_->StartEpoch(std::move(indices), epoch);
  timeline_->Restart();  // evaluation and epoch set-up are not part of any step
  // The bar ends where the epoch's training ends: at --max-steps if that comes first.
  progress_->StartEpoch(epoch, config_.epochs,
                        std::min(steps_per_epoch_, (resumed ? position_.epoch_steps : 0) + total_steps_ - step_),
                        resumed ? position_.epoch_steps : 0);
  WorkerStatus::Current().SetPhase("training");
  epoch_.images_seen = resumed ? position_.images_seen : 0;
  epoch_.steps = resumed ? position_.epoch_steps : 0;
  epoch_.micro = resumed ? position_.micro_batches : 0;
  epoch_.images_before = epoch_.images_seen;
  const auto sum_options = torch::TensorOptions().dtype(torch::kDouble).device(device_);
  epoch_.loss_sum = resumed ? position_.loss_sum : torch::zeros({}, sum_options);
  epoch_.loss_images = resumed ? position_.loss_images : torch::zeros({}, sum_options);
  if (graphed_) graphed_->SumLossesInto(epoch_.loss_sum, epoch_.loss_images);  // the graphed step adds to them
}

// The next micro-batch, timing the wait for it; nullopt at the epoch's end.
std::optional<Batch> TrainingSession::NextBatch() {
  if (epoch_.micro % config_.grad_accum == 0) profiler_->BeforeStep(step_ + 1);
  const auto wait_start = Clock::now();
  std::optional<Batch> batch = batches_->Next();
  const double waited = SecondsSince(wait_start);
  if (!batch) return std::nullopt;
  epoch_.data_wait += waited;
  epoch_.window_wait += waited;
  return batch;
}

torch::Tensor TrainingSession::TrainMicroBatch(const Batch& batch) {
  const int64_t micro = epoch_.micro;
  // A step is grad_accum micro-batches; DDP reduces gradients only after the last one.
  const bool last_micro = (micro + 1) % config_.grad_accum == 0 || micro + 1 == micro_batches_per_epoch_;
  // (B, C, H, W); undefined when the graphed step gathers the batch from its sample indices.
  const torch::Tensor images = batch.images.defined() ? ImagesInFormat(batch.images, channels_last_) : batch.images;
  timeline_->Mark(StepPhase::kInput);
  const torch::Tensor loss =
      runner_->MicroBatch(batch, images, micro % config_.grad_accum == 0, last_micro, step_ + 1, *timeline_);
  AccountLoss(loss, batch.size());
  epoch_.images_seen += batch.size();
  epoch_.window_images += batch.size();
  ++epoch_.micro;
  return loss;
}

// Non-finite losses, without a host synchronization per step:
//   skip: the loss's finiteness goes to the scaler as a device-side flag, which skips the step as
//         it does for a non-finite gradient, and counts it.
//   stop: nothing extra per step; the losses (and scales) of the steps since the last metrics row
//         go with the row and are checked when it completes (deferred_rows.h), or where the loop
//         synchronizes anyway; the first non-finite loss names the step. The few steps in between
//         may update with NaN gradients, which does not matter as the run ends there.
void TrainingSession::AccountLoss(const torch::Tensor& loss, int64_t batch_images) {
  const auto images = static_cast<double>(batch_images);
  if (skip_nonfinite_) {
    if (runner_->SumsLosses()) return;  // the graphed step skipped a non-finite loss and summed a finite one itself
    const torch::Tensor loss_nonfinite = loss.detach().isfinite().logical_not();  // () bool
    epoch_.step_nonfinite =
        epoch_.step_nonfinite.defined() ? epoch_.step_nonfinite.logical_or(loss_nonfinite) : loss_nonfinite;
    epoch_.loss_sum.add_(loss.detach().masked_fill(loss_nonfinite, 0), images);
    epoch_.loss_images.add_(loss_nonfinite.logical_not(), images);
    return;
  }
  window_losses_.losses.push_back(loss.detach());
  window_losses_.steps.push_back(step_ + 1);
  if (scaler_->enabled()) window_losses_.scales.push_back(scaler_->scale_tensor().clone());
  if (!runner_->SumsLosses()) {
    epoch_.loss_sum.add_(loss.detach(), images);
    epoch_.loss_images.add_(images);
  }
}

void TrainingSession::FinishStep(const torch::Tensor& loss) {
  faults_.AfterBackward(step_ + 1, world_.rank);
  runner_->FinishStep(epoch_.step_nonfinite, *timeline_);
  epoch_.step_nonfinite = torch::Tensor();
  ++step_;
  ++epoch_.steps;
  ++epoch_.window_steps;
  WorkerStatus::Current().SetStep(step_, epoch_.epoch);
  // Every rank, every step (at times a collective): before a test's hang-at-step, whose rank
  // stands for one stuck in its next step's gradient all-reduce.
  std::optional<StopRequest> stop_request = stop_agreement_->AtStepBoundary();
  faults_.AfterStep(log_, step_, world_.rank);
  if (step_ % log_every_ == 0 || epoch_.steps == steps_per_epoch_) AddMetricsRow(loss);
  WriteCompletedRows(/*wait=*/false);
  scheduler_->OnStep();
  optimizer_->set_lr(scheduler_->lr());
  // On a CPU the step's loss is there to read; elsewhere reading it would wait for the device.
  const std::optional<double> shown_loss =
      last_loss_ || !device_.is_cpu() ? last_loss_ : std::optional<double>(loss.item<double>());
  progress_->Update(epoch_.steps, shown_loss,
                    static_cast<double>((epoch_.images_seen - epoch_.images_before) * world_.world_size) /
                        SecondsSince(epoch_.start));
  stop_ = config_.max_steps > 0 && step_ >= config_.max_steps;
  // A stop signal ends the run here, unless the run's last step or the epoch's (stopped after its
  // evaluation, in EndEpoch) is done.
  if (stop_ || epoch_.micro == micro_batches_per_epoch_) stop_request.reset();
  // Mid-epoch checkpoints; the epoch's last step is saved after its evaluation instead.
  if (epoch_.micro < micro_batches_per_epoch_ &&
      (checkpoints_->DueAfterStep(step_) || (stop_ && checkpoints_->enabled()) || stop_request)) {
    const std::string path = WriteCheckpoint(
        TrainingPosition{epoch_.epoch, step_, epoch_.steps, epoch_.micro, epoch_.images_seen, {}, {}, {}});
    if (stop_request) interrupted_checkpoint_ = path;
  }
  const std::string trace = profiler_->AfterStep(step_);
  if (!trace.empty()) log_.info("trace of steps {} written to {}", config_.profile_steps, trace);
  interrupted_ = stop_request;
}

// A metrics row of the steps since the previous one; it completes later (deferred_rows.h).
void TrainingSession::AddMetricsRow(const torch::Tensor& loss) {
  DeferredRows::HostPart row;
  row.metrics.step = step_;
  row.metrics.epoch = epoch_.epoch;
  row.metrics.lr = optimizer_->lr();
  row.metrics.data_wait_seconds = epoch_.window_wait / static_cast<double>(epoch_.window_steps);
  row.metrics.elapsed_seconds = SecondsSince(loop_start_);
  row.steps = epoch_.window_steps;
  row.images = epoch_.window_images * world_.world_size;
  rows_->Add(std::move(row), loss, scaler_->scale_tensor(), timeline_->Cut(), std::move(window_losses_));
  window_losses_ = {};
  epoch_.window_wait = 0;
  epoch_.window_steps = 0;
  epoch_.window_images = 0;
}

// The checkpoint of this point of the run (a step boundary), written on rank 0; its path there,
// "" on the other ranks. A collective.
std::string TrainingSession::WriteCheckpoint(TrainingPosition at) {
  CheckAllLosses();  // a diverged run is not worth resuming
  at.step = step_;
  torch::Tensor totals = torch::stack({epoch_.loss_sum, epoch_.loss_images});
  ranks_.Sum(totals, "checkpoint loss");
  at.loss_sum = totals[0];
  at.loss_images = totals[1];
  at.epochs_detail = summary_.epochs_detail;
  const std::string path =
      checkpoints_->Write(step_, [&] { return SerializeCheckpoint(*identity_, *parts_, at); });
  if (!path.empty()) log_.info("checkpoint {}", path);
  return path;
}

// The metrics rows whose device work is done (`wait`: every row added), into metrics.csv and
// TensorBoard; a row with a non-finite loss ends the run as diverged.
void TrainingSession::WriteCompletedRows(bool wait) {
  for (DeferredRows::Completed& row : rows_->Take(wait)) {
    if (row.nonfinite) ThrowDiverged(*row.nonfinite, row.metrics.epoch);
    epoch_.phases.device += row.window_seconds;
    epoch_.phases.host += row.host_window_seconds;
    last_loss_ = row.metrics.loss;
    outputs_.AppendStep(row.metrics);
  }
}

// Every row, then the losses since the last one: before a checkpoint and at an epoch's end.
void TrainingSession::CheckAllLosses() {
  WriteCompletedRows(/*wait=*/true);
  if (const auto bad = FirstNonFiniteLoss(window_losses_)) ThrowDiverged(*bad, epoch_.epoch);
  window_losses_ = {};
}

void TrainingSession::ThrowDiverged(const NonFiniteLoss& bad, int64_t epoch) {
  RecordScaler();
  throw DivergedError(fmt::format(
      "loss became {} at step {} (epoch {}) with loss scale {} (--precision {}, --loss-scale {}); lower "
      "--lr, use --loss-scale dynamic with float16 policies, or pass --on-nonfinite skip to skip such steps",
      Real{bad.loss}, bad.step, epoch + 1, Real{bad.loss_scale}, config_.precision, config_.loss_scale));
}

// Synchronizes: at log points and the end only.
void TrainingSession::RecordScaler() {
  summary_.skipped_steps = scaler_->skipped_steps();
  summary_.final_loss_scale = scaler_->scale();
}

// Streamed images that could not be decoded (--on-bad-image skip): logged as found, counted in
// the summary, with --decode gpu's fallbacks to the CPU.
void TrainingSession::ReportSkippedImages() {
  for (const auto* source : {data_.train.get(), data_.test.get()}) {
    for (const std::string& message : source->TakeNewlySkipped()) log_.warn("{}", message);
  }
  summary_.skipped_images = data_.train->skipped() + data_.test->skipped();
  if (gpu_decoder_ == nullptr) return;
  const GpuDecodeStats stats = gpu_decoder_->stats();
  summary_.gpu_decode = GpuDecodeRecord{stats.gpu_images, stats.cpu_assisted, stats.cpu_fallbacks, stats.fallback_reasons};
}

}  // namespace mgpu
