// TrainingSession's set-up: data → model → mode → precision → batches → schedule → checkpoints →
// resume, then the start-up table and the loop's own state.
#include "worker/training_session.h"

#include <fmt/format.h>
#include <ATen/Version.h>

#include "common/files.h"
#include "common/status.h"
#include "cuda/captured_graph.h"
#include "cuda/step_stream.h"
#include "data/decode_mode.h"
#include "data/device_prefetcher.h"
#include "data/device_resident_batches.h"
#include "data/gpu_jpeg_batches.h"
#include "data/streaming_images.h"
#include "dataparallel/data_parallel.h"
#include "dataparallel/dp_devices.h"
#include "ddp/distributed_data_parallel.h"
#include "models/fused_kernels.h"
#include "models/memory_format.h"
#include "models/model_factory.h"
#include "worker/channels_last_choice.h"
#include "worker/graphed_step.h"
#include "worker/input_recipe.h"
#include "worker/memory_snapshot.h"
#include "worker/startup_table.h"

namespace mgpu {
namespace {

FusedOptimizer MakeOptimizer(const TrainConfig& config, std::vector<torch::Tensor> parameters,
                             Precision precision) {
  OptimizerOptions options;
  options.master_weights = UsesMasterWeights(precision);
  options.kind = config.optimizer;
  options.lr = EffectiveLr(config);
  options.momentum = config.momentum;
  options.nesterov = config.nesterov;
  options.weight_decay = config.weight_decay;
  return FusedOptimizer(std::move(parameters), options);
}

std::string DeviceName(const torch::Device& device) {
  return device.is_cuda() ? fmt::format("cuda:{}", device.index()) : "cpu";
}

}  // namespace

TrainingSession::TrainingSession(const TrainConfig& config, const WorldInfo& world, const torch::Device& device,
                                 Communicator* communicator, RunOutputs& outputs, RunSummary& summary)
    : config_(config),
      world_(world),
      device_(device),
      communicator_(communicator),
      outputs_(outputs),
      summary_(summary),
      log_(outputs.log()),
      faults_(TestFaults::FromEnvironment()),
      run_start_(Clock::now()),
      ddp_(config.mode == Mode::kDdp),
      ranks_(communicator, device),
      collective_watch_(communicator) {
  CheckBatchFitsWorld();
  OpenStepStream();
  SetUpNumerics();
  OpenData();
  BuildModel();
  BuildStepRunner();
  BuildBatches();
  PlanScheduleAndCheckpoints();
  ResumeFromCheckpoint();
  LogStartup();
  PrepareLoop();
}

TrainingSession::~TrainingSession() = default;

void TrainingSession::CheckBatchFitsWorld() {
  if (!ddp_ && world_.world_size != 1) {
    // Not inferred: a WORLD_SIZE left over in a shell or job environment would turn a one-process
    // run into a rank that waits --collective-timeout for peers that never come.
    throw BadInputError(fmt::format("--mode {} runs one process, but the world size is {} "
                                    "(from {}); use --mode ddp, or unset the rank variables. mgpu does not switch to "
                                    "ddp by itself: rank variables left over in the environment would make a "
                                    "one-process run wait for peers that never join",
                                    config_.mode, world_.world_size, world_.source));
  }
  if (config_.batch_size % (world_.world_size * config_.grad_accum) != 0) {
    throw BadInputError(fmt::format("--batch-size {} is the global batch: it must divide evenly over {} rank(s) "
                                    "x {} accumulated micro-batch(es)",
                                    config_.batch_size, world_.world_size, config_.grad_accum));
  }
  // Each optimizer step consumes the global batch: per rank, grad_accum micro-batches.
  micro_batch_ = config_.batch_size / world_.world_size / config_.grad_accum;
}

void TrainingSession::SetUpNumerics() {
  if (config_.threads > 0) torch::set_num_threads(static_cast<int>(config_.threads));
  precision_ = config_.precision;  // settled for the device (ResolvePrecisionForDevice)
  if (!config_.precision_warning.empty() && world_.rank == 0) log_.warn("{}", config_.precision_warning);
  ApplyPrecisionMathMode(precision_);
  // Static shapes: by default cuDNN times its convolution algorithms once and keeps the fastest.
  if (device_.is_cuda()) at::globalContext().setBenchmarkCuDNN(config_.cudnn_benchmark);
  UseFusedKernels(config_.fused_kernels);
  summary_.backend = communicator_ ? communicator_->backend() : "none";
  loss_scaling_ = config_.loss_scale;
  summary_.loss_scale_mode = LossScalingModeName(loss_scaling_.mode);
  if (!config_.memory_snapshot.empty()) {
    memory_snapshot_ = std::make_unique<MemorySnapshot>(config_.memory_snapshot, device_);
  }
  torch::manual_seed(config_.seed);
}

void TrainingSession::OpenData() {
  const std::string data_dir = config_.data_dir.empty() ? DefaultDataDir(config_.dataset) : config_.data_dir;
  const auto load_start = Clock::now();
  const auto augmentation = std::make_shared<const Augmentation>(AugmentOptionsFrom(config_));
  data_ = OpenDataset(config_.dataset, data_dir, DatasetOptionsFrom(config_), augmentation);
  load_seconds_ = SecondsSince(load_start);
  for (const std::string& warning : data_.warnings) log_.warn("{}", warning);
  if (config_.data_on_device && !data_.memory) {
    throw BadInputError(fmt::format("--data-on-device keeps the decoded training set on the device, but --data-loading "
                                    "{} chose to stream {} (too large to hold decoded); pass --data-loading memory or "
                                    "drop --data-on-device", config_.data_loading, data_.folder));
  }
  summary_.class_names = data_.train->class_names();
  summary_.data_loading = data_.data_loading;
  summary_.train_samples = data_.train->size();
  summary_.test_samples = data_.test->size();
  summary_.input = InputRecipe(config_, data_.data_loading, *data_.test);
}

void TrainingSession::BuildModel() {
  const ImageSize image_size = data_.train->image_size();
  const ModelShape shape{data_.train->channels(), data_.train->num_classes(), image_size.height, image_size.width};
  model_ = MakeModel(config_.model, shape);
  model_->to(device_);
  ConvertModelForPrecision(*model_, precision_);
  const ChannelsLastChoice layout = ChooseChannelsLast(config_.channels_last, *model_, device_, precision_);
  channels_last_ = layout.on;
  layout_reason_ = layout.reason;
  if (channels_last_) ConvertToChannelsLast(*model_);
  summary_.channels_last = channels_last_;
  model_->train();
  if (ddp_) replicated_ = std::make_unique<DistributedDataParallel>(model_, *communicator_, DdpOptionsFrom(config_));
  if (config_.mode == Mode::kDp) BuildDataParallel(shape);
  optimizer_.emplace(MakeOptimizer(config_, model_->parameters(), precision_));
  if (precision_ == Precision::kFp16 && config_.optimizer != "sgd" && world_.rank == 0) {
    // The moments live in float16 with the weights: squared gradients below 6e-8 flush to 0, and
    // an update divided by a zero second moment is what breaks such runs within a few steps.
    log_.warn("--precision fp16 with --optimizer {} keeps Adam's moments in float16, which usually turns the loss "
              "NaN within a few steps; use --precision o2 (float32 master weights and moments) or amp-fp16",
              config_.optimizer);
  }
  scaler_.emplace(loss_scaling_, device_);
  skip_nonfinite_ = config_.on_nonfinite == OnNonfinite::kSkip;
  summary_.parameters = CountParameters(*model_);
  // LibTorch's CPU kernels (AVX512, AVX2, ...; ATEN_CPU_CAPABILITY picks lower ones): their
  // float32 sums round in other orders.
  summary_.cpu_capability = at::get_cpu_capability();
}

// --mode dp: replicas of the model on more devices, in the primary's layout.
void TrainingSession::BuildDataParallel(const ModelShape& shape) {
  const TrainConfig& config = config_;
  const bool channels_last = channels_last_;
  data_parallel_ = MakeDataParallel(
      model_, DataParallelOptions{config.dp_impl,
                                  ResolveDataParallelDevices(config.dp_devices, config.device,
                                                             static_cast<int>(torch::cuda::device_count())),
                                  precision_,
                                  [&config, shape, channels_last] {
                                    std::shared_ptr<Classifier> replica = MakeModel(config.model, shape);
                                    if (channels_last) ConvertToChannelsLast(*replica);
                                    return replica;
                                  },
                                  config.label_smoothing, config.cuda_graphs});
}

void TrainingSession::BuildStepRunner() {
  // --cuda-graphs on one device per process: the whole step (DDP's all-reduces included), replayed.
  if (config_.cuda_graphs && !data_parallel_) {
    graphed_ = std::make_unique<GraphedTrainStep>(*model_, *optimizer_, *scaler_, precision_, config_.label_smoothing,
                                                  skip_nonfinite_, device_, replicated_.get());
  }
  const StepParts parts{*model_,  *optimizer_,        *scaler_,          precision_, config_.label_smoothing,
                        config_.grad_accum, config_.grad_clip, faults_};
  runner_ = MakeStepRunner(parts, graphed_.get(), data_parallel_.get(), replicated_.get());
}

void TrainingSession::BuildBatches() {
  sampler_.emplace(data_.train->size(), world_.rank, world_.world_size, /*shuffle=*/true, config_.seed);
  const DecodeChoice decode = ChooseDecoder(
      ParseDecodeMode(config_.decode),
      DecodeCircumstances{device_.is_cuda(), static_cast<bool>(data_parallel_), data_.train.get()});
  decode_why_ = decode.why;
  summary_.decode = decode.gpu ? "gpu" : "cpu";
  if (config_.data_on_device) {
    auto on_device = std::make_unique<DeviceResidentBatches>(data_.memory->train, micro_batch_, device_, channels_last_);
    if (graphed_) graphed_->GatherFrom(*on_device);  // the batches are gathered in the graph
    batches_ = std::move(on_device);
  } else if (decode.gpu) {
    auto streamed = std::dynamic_pointer_cast<const StreamingImages>(data_.train);
    auto gpu_batches = std::make_unique<GpuJpegBatches>(
        streamed, device_, micro_batch_, static_cast<int>(config_.num_workers), GpuDecoderChoice::kFastest,
        config_.cpu_assist ? CpuAssist::kWhileDeviceBusy : CpuAssist::kOff,
        channels_last_ ? torch::MemoryFormat::ChannelsLast : torch::MemoryFormat::Contiguous);
    gpu_decoder_ = gpu_batches.get();
    batches_ = std::move(gpu_batches);
  } else {
    // --mode dp: batches stay in (pinned) host memory, normalized; each replica copies its own
    // slice. One CUDA device: uint8 batches, normalized there (a quarter of the bytes to copy).
    const bool to_one_gpu = device_.is_cuda() && !data_parallel_;
    LoaderOptions options{micro_batch_, static_cast<int>(config_.num_workers), 2, device_.is_cuda()};
    options.pixels = to_one_gpu ? BatchPixels::kRaw : BatchPixels::kNormalized;
    loader_.emplace(data_.train, options);
    batches_ = std::make_unique<DevicePrefetcher>(*loader_, to_one_gpu ? device_ : torch::Device(torch::kCPU));
  }
  micro_batches_per_epoch_ = (sampler_->shard_size() + micro_batch_ - 1) / micro_batch_;
  steps_per_epoch_ = (micro_batches_per_epoch_ + config_.grad_accum - 1) / config_.grad_accum;
}

void TrainingSession::PlanScheduleAndCheckpoints() {
  scheduler_.emplace(SchedulerOptionsFrom(config_, steps_per_epoch_));
  optimizer_->set_lr(scheduler_->lr());
  summary_.effective_lr = EffectiveLr(config_);
  parts_.emplace(TrainingParts{*model_, *optimizer_, *scaler_, *scheduler_, device_});
  identity_.emplace(CheckpointIdentity::Of(config_, world_.world_size, *model_));
  checkpoints_.emplace(outputs_.folder() + "/checkpoints", config_.checkpoint_every, outputs_.writes_shared_files());
  checkpoint_path_ = CheckpointPath(config_, outputs_.folder());
  if (checkpoint_path_.empty() || !outputs_.writes_shared_files()) return;
  // Now, not after the training: a folder that cannot be made is found before the hours of work.
  try {
    MakeDirectories(checkpoint_path_.substr(0, checkpoint_path_.rfind('/')));
  } catch (const Error& e) {
    throw BadInputError(fmt::format("--checkpoint {}: {}; give a folder that can be written", config_.checkpoint,
                                    e.what()));
  }
}

// Before DDP is built: its gradient accumulators remember the stream they were made on (cuda/step_stream.h).
void TrainingSession::OpenStepStream() {
  const bool ahead_of_decode =
      MayDecodeOnGpu(ParseDecodeMode(config_.decode), device_.is_cuda(), config_.mode == Mode::kDp);
  if (!ahead_of_decode && !(ddp_ && config_.cuda_graphs)) return;
  step_stream_ =
      std::make_unique<StepStreamScope>(device_, ahead_of_decode ? StreamPriority::kHigh : StreamPriority::kDefault);
}

void TrainingSession::ResumeFromCheckpoint() {
  if (config_.resume.empty()) return;
  const std::string path = ResolveResumePath(config_.resume);
  position_ = RestoreCheckpoint(path, *identity_, *parts_);
  CheckPositionFits(position_, EpochShape{sampler_->shard_size(), micro_batches_per_epoch_, steps_per_epoch_}, path);
  if (position_.epoch >= config_.epochs || (config_.max_steps > 0 && position_.step >= config_.max_steps)) {
    throw BadInputError(fmt::format("--resume {}: the checkpoint is at epoch {}, step {}: nothing is left to train "
                                    "with --epochs {} --max-steps {}; raise them to train further",
                                    path, position_.epoch + 1, position_.step, config_.epochs, config_.max_steps));
  }
  // The checkpoint holds the epoch's running loss summed over the ranks; rank 0 carries it on.
  if (world_.rank != 0) {
    position_.loss_sum.zero_();
    position_.loss_images.zero_();
  }
  summary_.resumed_from = path;
  summary_.epochs_detail = position_.epochs_detail;
  log_.info("resumed from {}: epoch {}, step {}, {} micro-batch(es) of the epoch done", path, position_.epoch + 1,
            position_.step, position_.micro_batches);
}

void TrainingSession::LogStartup() {
  const ImageSize image_size = data_.train->image_size();
  const std::string loading =
      data_.data_loading == "memory"
          ? std::string("memory (decoded once)")
          : fmt::format("stream (decoded every epoch by {})",
                        config_.num_workers > 0 ? fmt::format("{} loader threads", config_.num_workers)
                                                : std::string("the training thread"));
  const auto* resident = dynamic_cast<const DeviceResidentBatches*>(batches_.get());
  const std::string batches =
      resident ? fmt::format("; kept on the device as uint8 ({:.1f} MiB), each batch gathered and normalized there",
                             static_cast<double>(resident->device_bytes()) / (1 << 20))
      : !loader_ ? std::string()
      : loader_->options().pixels == BatchPixels::kRaw ? "; batches copied as uint8, normalized on the device"
                                                       : "; batches normalized on the CPU";
  const bool step_first = step_stream_ && step_stream_->priority() == StreamPriority::kHigh;
  const std::string decode =
      (gpu_decoder_ ? fmt::format("{}: {}; device memory <= {} MiB", decode_why_, gpu_decoder_->Describe(),
                                  gpu_decoder_->MemoryBoundBytes() >> 20)
                    : decode_why_) +
      (step_first ? "; the step's stream at high priority" : "");
  const std::string dtypes = fmt::format(
      "{} / {}", c10::toString(ModelDtype(precision_)),
      AutocastDtype(precision_) ? c10::toString(*AutocastDtype(precision_)) : "off");
  LogStartupTable(
      log_, world_, config_,
      {{"rank / world", fmt::format("{} / {} ({})", world_.rank, world_.world_size, world_.source)},
       {"device", DeviceName(device_)},
       {"communication", communicator_   ? communicator_->backend()
                         : data_parallel_ ? data_parallel_->Describe()
                                          : "none (one process)"},
       {"batch per rank", fmt::format("{} x {} micro-batch(es)", micro_batch_, config_.grad_accum)},
       {"intra-op threads", std::to_string(torch::get_num_threads())},
       {"cpu kernels", at::get_cpu_capability()},
       {"data", fmt::format("{} train + {} test images {}x{}x{} from {} ({:.2f} s)", data_.train->size(),
                            data_.test->size(), data_.train->channels(), image_size.height, image_size.width,
                            data_.folder, load_seconds_)},
       {"data loading", loading + batches},
       {"decode", decode},
       {"model", fmt::format("{} ({} parameters)", config_.model, CountParameters(*model_))},
       {"precision", config_.precision_note.empty()
                         ? PrecisionName(config_.precision)
                         : fmt::format("{} ({})", config_.precision, config_.precision_note)},
       {"model dtype / autocast", dtypes},
       {"steps per epoch", std::to_string(steps_per_epoch_)},
       {"step execution", StepExecution()},
       {"memory layout", fmt::format("{} ({})", channels_last_ ? "channels-last" : "NCHW", layout_reason_)},
       {"fused kernels", !device_.is_cuda()       ? "none on the CPU"
                         : config_.fused_kernels ? "mgpu's where they apply (LeNet's conv + ReLU + max-pool stages "
                                                   "and fully connected head, float32 without autocast; ResNet's "
                                                   "and VGG's batch norm + add + ReLU and max-pools, channels-last "
                                                   "bf16 or float32)"
                                                 : "off (--fused-kernels false): ATen's"},
       {"effective lr", fmt::format("{} (--lr-scale-rule {}, global batch {})", EffectiveLr(config_),
                                    config_.lr_scale_rule, config_.batch_size)},
       {"output", outputs_.folder()},
       {"libtorch", TORCH_VERSION}});
}

// The start-up table's "step execution" row: how a step runs, in which layout, fed from where.
std::string TrainingSession::StepExecution() const {
  const std::string how = graphed_ ? fmt::format("one CUDA graph{} after {} eager steps{}",
                                                 replicated_ ? " with the all-reduces" : "", GraphedTrainStep::kEagerSteps,
                                                 graphed_->batches_weight_casts() ? ", autocast's weight casts batched" : "")
                          : config_.cuda_graphs ? "each replica's forward + backward as a CUDA graph"
                                                : "eager";
  return fmt::format("{}, {} tensors, batches from {}", how, channels_last_ ? "channels-last" : "NCHW",
                     config_.data_on_device ? "the data set on the device" : "the host loader");
}

void TrainingSession::PrepareLoop() {
  log_every_ = MetricsRowInterval(config_, steps_per_epoch_);
  total_steps_ = TotalSteps(config_, steps_per_epoch_);
  if (!WritesMetricsRow(position_.step, total_steps_, log_every_, steps_per_epoch_) && world_.rank == 0) {
    log_.warn("--log-every {} writes no metrics row before this run ends at step {}: metrics.csv and TensorBoard's "
              "train/loss stay empty; lower --log-every or leave it unset (a tenth of the run's steps)",
              log_every_, total_steps_);
  }
  progress_.emplace(config_.progress, world_.rank, log_);
  timeline_.emplace(device_);
  step_ = position_.step;
  stop_agreement_.emplace(communicator_, device_);
  rows_.emplace(device_);
  profiler_.emplace(ParseProfileWindow(config_.profile_steps),
                    fmt::format("{}/trace-rank{}.json", outputs_.folder(), world_.rank), device_);
}

}  // namespace mgpu
