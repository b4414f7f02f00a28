#include "worker/trainer.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <ATen/Version.h>
#include <torch/torch.h>

#include "amp/grad_scaler.h"
#include "amp/precision.h"
#include "common/files.h"
#include "common/real.h"
#include "common/status.h"
#include "cuda/captured_graph.h"
#include "cuda/device_memory.h"
#include "data/batch_loader.h"
#include "data/datasets.h"
#include "data/decode_mode.h"
#include "data/device_prefetcher.h"
#include "data/device_resident_batches.h"
#include "data/gpu_jpeg_batches.h"
#include "data/image_dataset.h"
#include "data/streaming_images.h"
#include "dataparallel/data_parallel.h"
#include "dataparallel/dp_devices.h"
#include "ddp/distributed_data_parallel.h"
#include "ddp/distributed_sampler.h"
#include "models/memory_format.h"
#include "models/model_factory.h"
#include "optim/fused_optimizer.h"
#include "optim/lr_scheduler.h"
#include "worker/channels_last_choice.h"
#include "worker/checkpoint.h"
#include "worker/deferred_rows.h"
#include "worker/graphed_step.h"
#include "worker/input_recipe.h"
#include "worker/memory_snapshot.h"
#include "worker/progress.h"
#include "worker/state_dict_export.h"
#include "worker/step_runner.h"
#include "worker/step_timeline.h"
#include "worker/stop_signal.h"
#include "worker/test_faults.h"
#include "worker/trace_profiler.h"
#include "worker/worker_status.h"

namespace mgpu {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kStateDictFile[] = "model_state_dict.pt";

nlohmann::json PhaseJson(const PhaseSeconds& phases) {
  nlohmann::json json = nlohmann::json::object();
  for (size_t i = 0; i < kStepPhaseCount; ++i) json[StepPhaseName(static_cast<StepPhase>(i))] = phases.seconds[i];
  return json;
}

// An epoch's step phases, as the device ran them and as the host issued them.
struct EpochPhases {
  PhaseSeconds device;
  PhaseSeconds host;
};

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

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

// Sum over all parameters of the sum of absolute values, in double precision.
double ParamChecksum(Classifier& model) {
  torch::NoGradGuard no_grad;
  double total = 0;
  for (const auto& p : model.parameters()) total += p.detach().to(torch::kDouble).abs().sum().item<double>();
  return total;
}

// The ranks of the job as the loop sees them; with no communicator, a group of one.
class RankGroup {
 public:
  RankGroup(Communicator* communicator, const torch::Device& device) : communicator_(communicator), device_(device) {}
  int size() const { return communicator_ ? communicator_->size() : 1; }

  // Sums a tensor (on the training device) over the ranks, in place.
  void Sum(torch::Tensor& tensor, const std::string& what) {
    if (communicator_ && size() > 1) communicator_->AllReduceSum(tensor, what)->Wait();
  }
  // Every rank's `value`, in rank order.
  std::vector<double> Gather(double value, const std::string& what) {
    if (!communicator_ || size() == 1) return {value};
    auto options = torch::TensorOptions().dtype(torch::kDouble).device(device_);
    torch::Tensor all = torch::empty({size()}, options);
    communicator_->AllGather(all, torch::full({1}, value, options), what)->Wait();
    all = all.cpu();
    return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + size());
  }

 private:
  Communicator* communicator_;
  torch::Device device_;
};

struct Evaluation {
  int64_t samples = 0;                   // test images evaluated, over every rank
  double loss = 0;
  double accuracy = 0;                   // percent
  std::vector<double> per_class_accuracy;  // percent
};

// The test images evaluated: all of them, or `max_samples` (> 0) spread evenly over the test set,
// so that a folder sorted by class still has every class in the sample.
std::vector<int64_t> EvaluatedSamples(int64_t test_size, int64_t max_samples) {
  const int64_t count = max_samples > 0 ? std::min(max_samples, test_size) : test_size;
  std::vector<int64_t> samples(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) samples[static_cast<size_t>(k)] = k * test_size / count;
  return samples;
}

// Each rank evaluates every size()-th of the EvaluatedSamples; the counts are summed over the
// ranks. `num_workers` loader threads (streamed test images are decoded as they are read).
Evaluation Evaluate(Classifier& model, const std::shared_ptr<const SampleSource>& test, int64_t batch_size,
                    int64_t max_samples, int num_workers, const torch::Device& device, Precision precision, int rank,
                    RankGroup& ranks, bool channels_last) {
  torch::NoGradGuard no_grad;
  model.eval();
  BatchLoader loader(test, LoaderOptions{batch_size, num_workers, 2, device.is_cuda()});
  const std::vector<int64_t> samples = EvaluatedSamples(test->size(), max_samples);
  std::vector<int64_t> order;
  for (size_t i = static_cast<size_t>(rank); i < samples.size(); i += static_cast<size_t>(ranks.size())) {
    order.push_back(samples[i]);
  }
  loader.StartEpoch(std::move(order));
  const int64_t classes = test->num_classes();
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  auto correct = torch::zeros({classes}, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto seen = torch::zeros({classes}, torch::TensorOptions().dtype(torch::kLong).device(device));
  while (auto batch = loader.Next()) {
    auto images = ImagesInFormat(batch->images.to(device, /*non_blocking=*/true), channels_last);  // (B, C, H, W)
    auto labels = batch->labels.to(device, /*non_blocking=*/true);  // (B)
    auto logits = PolicyForward(model, images, precision);                // (B, classes)
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, labels,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .to(torch::kDouble);
    auto hits = logits.argmax(1).eq(labels);
    seen += torch::bincount(labels, {}, classes);
    correct += torch::bincount(labels.masked_select(hits), {}, classes);
  }
  model.train();
  // One reduction for all counts: (loss, correct per class, seen per class).
  torch::Tensor totals = torch::cat({loss_sum.reshape(1), correct.to(torch::kDouble), seen.to(torch::kDouble)});
  ranks.Sum(totals, "evaluation counts");
  totals = totals.cpu();
  loss_sum = totals[0];
  auto correct_cpu = totals.slice(0, 1, 1 + classes).to(torch::kLong);
  auto seen_cpu = totals.slice(0, 1 + classes).to(torch::kLong);
  Evaluation result;
  result.samples = static_cast<int64_t>(samples.size());
  const double n = static_cast<double>(samples.size());
  result.loss = loss_sum.item<double>() / n;
  result.accuracy = 100.0 * static_cast<double>(correct_cpu.sum().item<int64_t>()) / n;
  for (int64_t c = 0; c < classes; ++c) {
    const auto s = seen_cpu[c].item<int64_t>();
    result.per_class_accuracy.push_back(s > 0 ? 100.0 * static_cast<double>(correct_cpu[c].item<int64_t>()) / static_cast<double>(s) : 0.0);
  }
  return result;
}

std::string DeviceName(const torch::Device& device) {
  return device.is_cuda() ? fmt::format("cuda:{}", device.index()) : "cpu";
}

// The start-up table, on rank 0 only (the ranks of one job share the configuration): the options
// that differ from their defaults, then what the run resolved from them. config.yaml has every
// option; the other ranks log one line.
void LogStartupTable(spdlog::logger& log, const WorldInfo& world, const TrainConfig& config,
                     const std::vector<std::pair<std::string, std::string>>& derived) {
  if (world.rank != 0) {
    log.info("rank {} of {}: the configuration is in rank 0's log and config.yaml", world.rank, world.world_size);
    return;
  }
  const TrainConfig defaults;
  std::vector<std::pair<std::string, std::string>> changed;
  for (const auto& spec : TrainOptions()) {
    if (spec.saved && spec.get(config) != spec.get(defaults)) changed.emplace_back(spec.name, spec.get(config));
  }
  size_t width = 0;
  for (const auto& rows : {changed, derived}) {
    for (const auto& [key, value] : rows) width = std::max(width, key.size());
  }
  const std::string rule(width + 40, '-');
  log.info("{}", rule);
  log.info("{:<{}} | {}", "options set", width,
           changed.empty() ? "none: every option at its default" : "those that differ from the defaults");
  for (const auto& [key, value] : changed) log.info("{:<{}} | {}", key, width, value);
  log.info("{}", rule);
  for (const auto& [key, value] : derived) log.info("{:<{}} | {}", key, width, value);
  log.info("{}", rule);
}

// summary.json's record of a run stopped by a signal, and the log line that says how to go on.
void RecordInterruption(const StopRequest& request, int64_t step, const std::string& checkpoint, RunOutputs& outputs,
                        nlohmann::json& summary) {
  const std::string signal = SignalName(request.signal);
  summary["status"] = "interrupted";
  summary["exit_code"] = 128 + request.signal;
  summary["interrupted"] = {{"signal", signal}, {"signal_number", request.signal}, {"rank", request.rank},
                            {"step", step}, {"checkpoint", checkpoint}};
  const std::string received =
      summary["world_size"].get<int64_t>() > 1 ? fmt::format(" (received by rank {})", request.rank) : "";
  if (outputs.writes_shared_files()) {
    outputs.log().warn("{}{} at step {}: checkpoint written to {}, resume with --resume {}", signal, received, step,
                       checkpoint, outputs.folder());
  } else {
    outputs.log().warn("{}{} at step {}: every rank stopped there; rank 0 wrote the checkpoint", signal, received, step);
  }
}

}  // namespace

torch::Device ResolveDevice(const std::string& requested, const WorldInfo& world) {
  if (requested == "cpu") return torch::kCPU;
  const bool have_cuda = torch::cuda::is_available();
  if (requested == "auto" && !have_cuda) return torch::kCPU;
  if (!have_cuda) {
    throw BadInputError(fmt::format("--device {}: no CUDA device is visible to this process "
                                    "(check CUDA_VISIBLE_DEVICES and the driver), or use --device cpu",
                                    requested));
  }
  const int count = static_cast<int>(torch::cuda::device_count());
  const int index = requested.rfind("cuda:", 0) == 0 ? std::stoi(requested.substr(5)) : DefaultCudaIndex(world, count);
  if (index >= count) {
    throw BadInputError(fmt::format("--device {} on local rank {}: only {} CUDA device(s) are visible "
                                    "(cuda:0 to cuda:{})",
                                    requested, world.local_rank, count, count - 1));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

nlohmann::json SummaryFromConfig(const TrainConfig& config, const WorldInfo& world) {
  return {
      {"model", config.model},
      {"dataset", config.dataset},
      {"mode", config.mode},
      {"backend", "none"},
      {"world_size", world.world_size},
      {"devices", nlohmann::json::array()},
      {"precision", config.precision},
      {"loss_scale_mode", "none"},
      {"batch_size", config.batch_size},
      {"num_workers", config.num_workers},
      {"data_loading", nullptr},
      {"decode", nullptr},
      {"train_samples", nullptr},
      {"test_samples", nullptr},
      {"skipped_images", 0},
      {"epochs", config.epochs},
      {"max_steps", config.max_steps},
      {"lr", config.lr},
      {"optimizer", config.optimizer},
      {"seed", config.seed},
      {"name", config.name},
      {"status", "failed"},
      {"error", ""},
      {"total_seconds", 0.0},
      {"test_accuracy", nullptr},
      {"test_loss", nullptr},
      {"per_class_accuracy", nlohmann::json::array()},
      {"peak_memory_bytes", nlohmann::json::array()},
      {"skipped_steps", 0},
      {"final_loss_scale", 1.0},
      {"param_checksum", nullptr},
      {"epochs_detail", nlohmann::json::array()},
      {"rendezvous_source", world.source},
  };
}

std::optional<StopRequest> Train(const TrainConfig& config, const WorldInfo& world, const torch::Device& device,
                                 Communicator* communicator, RunOutputs& outputs, nlohmann::json& summary) {
  const auto run_start = Clock::now();
  spdlog::logger& log = outputs.log();
  const TestFaults& faults = TestFaults::FromEnvironment();
  const bool ddp = config.mode == "ddp";
  if (!ddp && world.world_size != 1) {
    // Not inferred: a WORLD_SIZE left over in a shell or job environment would turn a one-process
    // run into a rank that waits --collective-timeout for peers that never come.
    throw BadInputError(fmt::format("--mode {} runs one process, but the world size is {} "
                                    "(from {}); use --mode ddp, or unset the rank variables. mgpu does not switch to "
                                    "ddp by itself: rank variables left over in the environment would make a "
                                    "one-process run wait for peers that never join",
                                    config.mode, world.world_size, world.source));
  }
  if (config.batch_size % (world.world_size * config.grad_accum) != 0) {
    throw BadInputError(fmt::format("--batch-size {} is the global batch: it must divide evenly over {} rank(s) "
                                    "x {} accumulated micro-batch(es)",
                                    config.batch_size, world.world_size, config.grad_accum));
  }
  // Each optimizer step consumes the global batch: per rank, grad_accum micro-batches.
  const int64_t micro_batch = config.batch_size / world.world_size / config.grad_accum;
  // A graphed DDP step is captured on the stream its eager steps ran on (captured_graph.h).
  std::optional<CapturableStreamScope> capturable_stream;
  if (ddp && config.cuda_graphs) capturable_stream.emplace(device);
  RankGroup ranks(communicator, device);
  const CollectiveWatch collective_watch(communicator);  // heartbeats name a collective this rank waits in
  if (config.threads > 0) torch::set_num_threads(static_cast<int>(config.threads));
  const Precision precision = ParsePrecision(config.precision);  // settled for the device (ResolvePrecisionForDevice)
  if (!config.precision_warning.empty() && world.rank == 0) log.warn("{}", config.precision_warning);
  ApplyPrecisionMathMode(precision);
  // Static shapes: let cuDNN pick its fastest convolution algorithms once (as benchmark=True).
  if (device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);
  summary["backend"] = communicator ? communicator->backend() : "none";
  const LossScaling loss_scaling = ParseLossScaling(config.loss_scale);
  summary["loss_scale_mode"] = LossScalingModeName(loss_scaling.mode);
  std::optional<MemorySnapshot> memory_snapshot;
  if (!config.memory_snapshot.empty()) memory_snapshot.emplace(config.memory_snapshot, device);
  torch::manual_seed(config.seed);

  // Data.
  const std::string data_dir = config.data_dir.empty() ? DefaultDataDir(config.dataset) : config.data_dir;
  const auto load_start = Clock::now();
  const auto augmentation = std::make_shared<const Augmentation>(AugmentOptionsFrom(config));
  const OpenedDataset data = OpenDataset(config.dataset, data_dir, DatasetOptionsFrom(config), augmentation);
  const double load_seconds = SecondsSince(load_start);
  for (const std::string& warning : data.warnings) log.warn("{}", warning);
  if (config.data_on_device && !data.memory) {
    throw BadInputError(fmt::format("--data-on-device keeps the decoded training set on the device, but --data-loading "
                                    "{} chose to stream {} (too large to hold decoded); pass --data-loading memory or "
                                    "drop --data-on-device", config.data_loading, data.folder));
  }
  summary["class_names"] = data.train->class_names();
  summary["data_loading"] = data.data_loading;
  summary["train_samples"] = data.train->size();
  summary["test_samples"] = data.test->size();
  summary["input"] = InputRecipe(config, data.data_loading, *data.test);
  const ImageSize image_size = data.train->image_size();
  // Streamed images that could not be decoded (--on-bad-image skip): logged as found, counted in
  // the summary.
  GpuJpegBatches* gpu_decoder = nullptr;  // --decode gpu: its fallback counts go to summary.json
  auto report_skipped_images = [&] {
    for (const auto* source : {data.train.get(), data.test.get()}) {
      for (const std::string& message : source->TakeNewlySkipped()) log.warn("{}", message);
    }
    summary["skipped_images"] = data.train->skipped() + data.test->skipped();
    if (gpu_decoder != nullptr) {
      const GpuDecodeStats stats = gpu_decoder->stats();
      summary["gpu_decode"] = {{"images", stats.gpu_images}, {"cpu_fallbacks", stats.cpu_fallbacks},
                               {"fallback_reasons", stats.fallback_reasons}};
    }
  };

  // Model, DDP wrapper and optimizer.
  const ModelShape shape{data.train->channels(), data.train->num_classes(), image_size.height, image_size.width};
  auto model = MakeModel(config.model, shape);
  model->to(device);
  ConvertModelForPrecision(*model, precision);
  const ChannelsLastChoice layout = ChooseChannelsLast(config.channels_last, *model, device, precision);
  const bool channels_last = layout.on;
  if (channels_last) ConvertToChannelsLast(*model);
  summary["channels_last"] = channels_last;
  model->train();
  std::unique_ptr<DistributedDataParallel> replicated;
  if (ddp) replicated = std::make_unique<DistributedDataParallel>(model, *communicator, DdpOptionsFrom(config));
  std::unique_ptr<DataParallelEngine> data_parallel;  // --mode dp: replicas of `model` on more devices
  if (config.mode == "dp") {
    data_parallel = MakeDataParallel(
        model, DataParallelOptions{config.dp_impl,
                                   ResolveDataParallelDevices(config.dp_devices, config.device,
                                                              static_cast<int>(torch::cuda::device_count())),
                                   precision,
                                   [&config, shape, channels_last] {
                                     std::shared_ptr<Classifier> replica = MakeModel(config.model, shape);
                                     if (channels_last) ConvertToChannelsLast(*replica);  // the primary's layout
                                     return replica;
                                   },
                                   config.label_smoothing, config.cuda_graphs});
  }
  FusedOptimizer optimizer = MakeOptimizer(config, model->parameters(), precision);
  if (precision == Precision::kFp16 && config.optimizer != "sgd" && world.rank == 0) {
    // The moments live in float16 with the weights: squared gradients below 6e-8 flush to 0, and
    // an update divided by a zero second moment is what breaks such runs within a few steps.
    log.warn("--precision fp16 with --optimizer {} keeps Adam's moments in float16, which usually turns the loss "
             "NaN within a few steps; use --precision o2 (float32 master weights and moments) or amp-fp16",
             config.optimizer);
  }
  GradScaler scaler(loss_scaling, device);
  const bool skip_nonfinite = config.on_nonfinite == "skip";
  summary["parameters"] = CountParameters(*model);
  // LibTorch's CPU kernels (AVX512, AVX2, ...; ATEN_CPU_CAPABILITY picks lower ones): their
  // float32 sums round in other orders.
  summary["cpu_capability"] = at::get_cpu_capability();
  // --cuda-graphs on one device per process: the whole step (DDP's all-reduces included), replayed.
  std::unique_ptr<GraphedTrainStep> graphed;
  if (config.cuda_graphs && !data_parallel) {
    graphed = std::make_unique<GraphedTrainStep>(*model, optimizer, scaler, precision, config.label_smoothing,
                                                 skip_nonfinite, device, replicated.get());
  }

  const StepParts step_parts{*model, optimizer, scaler, precision, config.label_smoothing, config.grad_accum,
                             config.grad_clip, faults};
  const std::unique_ptr<StepRunner> runner =
      MakeStepRunner(step_parts, graphed.get(), data_parallel.get(), replicated.get());

  DistributedSampler sampler(data.train->size(), world.rank, world.world_size, /*shuffle=*/true, config.seed);
  std::optional<BatchLoader> loader;      // host batches, unless the data set lives on the device
  std::unique_ptr<BatchSource> batches;  // batches on the training device (--mode dp: on the host)
  const DecodeChoice decode = ChooseDecoder(
      ParseDecodeMode(config.decode),
      DecodeCircumstances{device.is_cuda(), static_cast<bool>(data_parallel), data.train.get()});
  summary["decode"] = decode.gpu ? "gpu" : "cpu";
  if (config.data_on_device) {
    auto on_device = std::make_unique<DeviceResidentBatches>(data.memory->train, micro_batch, device);
    if (graphed) graphed->GatherFrom(*on_device, channels_last);  // the batches are gathered in the graph
    batches = std::move(on_device);
  } else if (decode.gpu) {
    auto streamed = std::dynamic_pointer_cast<const StreamingImages>(data.train);
    auto gpu_batches = std::make_unique<GpuJpegBatches>(streamed, device, micro_batch,
                                                        static_cast<int>(config.num_workers));
    gpu_decoder = gpu_batches.get();
    batches = std::move(gpu_batches);
  } else {
    loader.emplace(data.train, LoaderOptions{micro_batch, static_cast<int>(config.num_workers), 2, device.is_cuda()});
    // --mode dp: batches stay in (pinned) host memory; each replica copies its own slice.
    batches = std::make_unique<DevicePrefetcher>(*loader, data_parallel ? torch::Device(torch::kCPU) : device);
  }
  const int64_t micro_batches_per_epoch = (sampler.shard_size() + micro_batch - 1) / micro_batch;
  const int64_t steps_per_epoch = (micro_batches_per_epoch + config.grad_accum - 1) / config.grad_accum;

  LrScheduler scheduler(SchedulerOptionsFrom(config, steps_per_epoch));
  optimizer.set_lr(scheduler.lr());
  summary["effective_lr"] = EffectiveLr(config);
  TrainingParts parts{*model, optimizer, scaler, scheduler, device};
  const CheckpointIdentity identity = CheckpointIdentity::Of(config, world.world_size, *model);
  CheckpointWriter checkpoints(outputs.folder() + "/checkpoints", config.checkpoint_every,
                               outputs.writes_shared_files());
  const std::string checkpoint_path = CheckpointPath(config, outputs.folder());
  if (!checkpoint_path.empty() && outputs.writes_shared_files()) {
    // Now, not after the training: a folder that cannot be made is found before the hours of work.
    const std::string folder = checkpoint_path.substr(0, checkpoint_path.rfind('/'));
    try {
      MakeDirectories(folder);
    } catch (const Error& e) {
      throw BadInputError(fmt::format("--checkpoint {}: {}; give a folder that can be written", config.checkpoint,
                                      e.what()));
    }
  }
  TrainingPosition position;
  if (!config.resume.empty()) {
    const std::string path = ResolveResumePath(config.resume);
    position = RestoreCheckpoint(path, identity, parts);
    CheckPositionFits(position, EpochShape{sampler.shard_size(), micro_batches_per_epoch, steps_per_epoch}, path);
    if (position.epoch >= config.epochs || (config.max_steps > 0 && position.step >= config.max_steps)) {
      throw BadInputError(fmt::format("--resume {}: the checkpoint is at epoch {}, step {}: nothing is left to train "
                                      "with --epochs {} --max-steps {}; raise them to train further",
                                      path, position.epoch + 1, position.step, config.epochs, config.max_steps));
    }
    // The checkpoint holds the epoch's running loss summed over the ranks; rank 0 carries it on.
    if (world.rank != 0) {
      position.loss_sum.zero_();
      position.loss_images.zero_();
    }
    summary["resumed_from"] = path;
    summary["epochs_detail"] = position.epochs_detail;
    log.info("resumed from {}: epoch {}, step {}, {} micro-batch(es) of the epoch done", path, position.epoch + 1,
             position.step, position.micro_batches);
  }

  LogStartupTable(log, world, config,
                  {{"rank / world", fmt::format("{} / {} ({})", world.rank, world.world_size, world.source)},
                   {"device", DeviceName(device)},
                   {"communication", communicator     ? communicator->backend()
                                     : data_parallel ? data_parallel->Describe()
                                                     : "none (one process)"},
                   {"batch per rank", fmt::format("{} x {} micro-batch(es)", micro_batch, config.grad_accum)},
                   {"intra-op threads", std::to_string(torch::get_num_threads())},
                   {"cpu kernels", at::get_cpu_capability()},
                   {"data", fmt::format("{} train + {} test images {}x{}x{} from {} ({:.2f} s)",
                                        data.train->size(), data.test->size(), data.train->channels(),
                                        image_size.height, image_size.width, data.folder, load_seconds)},
                   {"data loading", data.data_loading == "memory"
                                        ? std::string("memory (decoded once)")
                                        : fmt::format("stream (decoded every epoch by {})",
                                                      config.num_workers > 0
                                                          ? fmt::format("{} loader threads", config.num_workers)
                                                          : std::string("the training thread"))},
                   {"decode", gpu_decoder ? fmt::format("{}: {}; device memory <= {} MiB", decode.why,
                                                        gpu_decoder->Describe(),
                                                        gpu_decoder->MemoryBoundBytes() >> 20)
                                          : decode.why},
                   {"model", fmt::format("{} ({} parameters)", config.model, CountParameters(*model))},
                   {"precision", config.precision_note.empty()
                                     ? config.precision
                                     : fmt::format("{} ({})", config.precision, config.precision_note)},
                   {"model dtype / autocast", fmt::format("{} / {}", c10::toString(ModelDtype(precision)),
                                                           AutocastDtype(precision)
                                                               ? c10::toString(*AutocastDtype(precision))
                                                               : "off")},
                   {"steps per epoch", std::to_string(steps_per_epoch)},
                   {"step execution", fmt::format("{}, {} tensors, batches from {}",
                                                  graphed ? fmt::format("one CUDA graph{} after {} eager steps",
                                                                        replicated ? " with the all-reduces" : "",
                                                                        GraphedTrainStep::kEagerSteps)
                                                  : config.cuda_graphs ? "each replica's forward + backward as a CUDA graph"
                                                                       : "eager",
                                                  channels_last ? "channels-last" : "NCHW",
                                                  config.data_on_device ? "the data set on the device" : "the host loader")},
                   {"memory layout", fmt::format("{} ({})", channels_last ? "channels-last" : "NCHW", layout.reason)},
                   {"effective lr", fmt::format("{} (--lr-scale-rule {}, global batch {})", EffectiveLr(config),
                                                config.lr_scale_rule, config.batch_size)},
                   {"output", outputs.folder()},
                   {"libtorch", TORCH_VERSION}});

  const int64_t log_every = MetricsRowInterval(config, steps_per_epoch);
  const int64_t total_steps = TotalSteps(config, steps_per_epoch);
  if (!WritesMetricsRow(position.step, total_steps, log_every, steps_per_epoch) && world.rank == 0) {
    log.warn("--log-every {} writes no metrics row before this run ends at step {}: metrics.csv and TensorBoard's "
             "train/loss stay empty; lower --log-every or leave it unset (a tenth of the run's steps)",
             log_every, total_steps);
  }
  Progress progress(config.progress, world.rank, log);
  StepTimeline timeline(device);
  int64_t step = position.step;
  bool stop = false;
  StopAgreement stop_agreement(communicator, device);
  std::optional<StopRequest> interrupted;  // the signal that ended the run, at a step boundary
  std::string interrupted_checkpoint;      // its checkpoint (on rank 0)
  std::optional<double> last_loss;  // of the last completed metrics row, for the progress display
  auto record_scaler = [&] {  // synchronizes: at log points and the end only
    summary["skipped_steps"] = scaler.skipped_steps();
    summary["final_loss_scale"] = scaler.scale();
  };
  // Non-finite losses, without a host synchronization per step:
  //   skip: the loss's finiteness goes to the scaler as a device-side flag, which skips the
  //         step as it does for a non-finite gradient, and counts it.
  //   stop: nothing extra per step; the losses (and scales) of the steps since the last metrics
  //         row go with the row and are checked when it completes (deferred_rows.h), or here
  //         where the loop synchronizes anyway; the first non-finite loss names the step. The
  //         few steps in between may update with NaN gradients, which does not matter as the run
  //         ends there.
  WindowLosses window_losses;  // one per micro-batch since the last metrics row
  auto throw_diverged = [&](const NonFiniteLoss& bad, int64_t epoch) {
    record_scaler();
    throw DivergedError(fmt::format(
        "loss became {} at step {} (epoch {}) with loss scale {} (--precision {}, --loss-scale {}); lower "
        "--lr, use --loss-scale dynamic with float16 policies, or pass --on-nonfinite skip to skip such steps",
        Real{bad.loss}, bad.step, epoch + 1, Real{bad.loss_scale}, config.precision, config.loss_scale));
  };
  // Metrics rows complete a row late (deferred_rows.h); `wait` completes every one added.
  DeferredRows rows(device);
  auto write_completed_rows = [&](bool wait, EpochPhases& epoch_phases) {
    for (DeferredRows::Completed& row : rows.Take(wait)) {
      if (row.nonfinite) throw_diverged(*row.nonfinite, row.metrics.epoch);
      epoch_phases.device += row.window_seconds;
      epoch_phases.host += row.host_window_seconds;
      last_loss = row.metrics.loss;
      outputs.AppendStep(row.metrics);
    }
  };
  // Every row, then the losses since the last one: before a checkpoint and at an epoch's end.
  auto check_all_losses = [&](int64_t epoch, EpochPhases& epoch_phases) {
    write_completed_rows(/*wait=*/true, epoch_phases);
    if (const auto bad = FirstNonFiniteLoss(window_losses)) throw_diverged(*bad, epoch);
    window_losses = {};
  };
  TraceProfiler profiler(ParseProfileWindow(config.profile_steps),
                         fmt::format("{}/trace-rank{}.json", outputs.folder(), world.rank), device);
  for (int64_t epoch = position.epoch; epoch < config.epochs && !stop && !interrupted; ++epoch) {
    const auto epoch_start = Clock::now();
    const double collective_seconds_before =
        communicator ? communicator->CompletedCollectiveSeconds().value_or(0) : 0;
    // A resumed epoch skips the micro-batches done before the checkpoint: the rest are the same.
    const bool resumed = epoch == position.epoch && position.micro_batches > 0;
    std::vector<int64_t> indices = sampler.EpochIndices(epoch);
    if (resumed) {
      indices.erase(indices.begin(), indices.begin() + std::min<int64_t>(position.micro_batches * micro_batch,
                                                                         static_cast<int64_t>(indices.size())));
    }
    batches->StartEpoch(std::move(indices), epoch);
    timeline.Restart();  // evaluation and epoch set-up are not part of any step
    // The bar ends where the epoch's training ends: at --max-steps if that comes first.
    progress.StartEpoch(epoch, config.epochs,
                        std::min(steps_per_epoch, (resumed ? position.epoch_steps : 0) + total_steps - step),
                        resumed ? position.epoch_steps : 0);
    WorkerStatus::Current().SetPhase("training");
    double data_wait = 0;
    EpochPhases epoch_phases;
    int64_t images_seen = resumed ? position.images_seen : 0;
    int64_t epoch_steps = resumed ? position.epoch_steps : 0;
    int64_t micro = resumed ? position.micro_batches : 0;
    const int64_t images_before = images_seen;  // trained before this process's part of the epoch
    torch::Tensor step_nonfinite;  // () bool, with --on-nonfinite skip: a micro-batch's loss was not finite
    auto loss_sum = resumed ? position.loss_sum
                            : torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
    // Images of the steps whose loss is in loss_sum (with skip, the finite ones).
    auto loss_images = resumed ? position.loss_images
                               : torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
    if (graphed) graphed->SumLossesInto(loss_sum, loss_images);  // the graphed step adds to them
    // The checkpoint of this point of the run (a step boundary), written on rank 0; its path
    // there, "" on the other ranks.
    auto write_checkpoint = [&](TrainingPosition at) {
      check_all_losses(epoch, epoch_phases);  // a diverged run is not worth resuming
      at.step = step;
      torch::Tensor totals = torch::stack({loss_sum, loss_images});
      ranks.Sum(totals, "checkpoint loss");
      at.loss_sum = totals[0];
      at.loss_images = totals[1];
      at.epochs_detail = summary["epochs_detail"];
      const std::string path = checkpoints.Write(step, [&] { return SerializeCheckpoint(identity, parts, at); });
      if (!path.empty()) log.info("checkpoint {}", path);
      return path;
    };
    // Per metrics row: data wait, steps and images since the previous row.
    double window_wait = 0;
    int64_t window_steps = 0, window_images = 0;

    while (true) {
      if (micro % config.grad_accum == 0) profiler.BeforeStep(step + 1);
      const auto wait_start = Clock::now();
      std::optional<Batch> batch = batches->Next();
      const double waited = SecondsSince(wait_start);
      if (!batch) break;
      data_wait += waited;
      window_wait += waited;

      // A step is grad_accum micro-batches; DDP reduces gradients only after the last one.
      const bool last_micro = (micro + 1) % config.grad_accum == 0 || micro + 1 == micro_batches_per_epoch;
      // (B, C, H, W); undefined when the graphed step gathers the batch from its sample indices.
      const torch::Tensor images =
          batch->images.defined() ? ImagesInFormat(batch->images, channels_last) : batch->images;
      timeline.Mark(StepPhase::kInput);
      const torch::Tensor loss = runner->MicroBatch(*batch, images, micro % config.grad_accum == 0, last_micro,
                                                    step + 1, timeline);
      const int64_t batch_images = batch->size();
      if (skip_nonfinite) {
        if (!runner->SumsLosses()) {  // the graphed step skipped a non-finite loss and summed a finite one itself
          const torch::Tensor loss_nonfinite = loss.detach().isfinite().logical_not();  // () bool
          step_nonfinite = step_nonfinite.defined() ? step_nonfinite.logical_or(loss_nonfinite) : loss_nonfinite;
          loss_sum.add_(loss.detach().masked_fill(loss_nonfinite, 0), static_cast<double>(batch_images));
          loss_images.add_(loss_nonfinite.logical_not(), static_cast<double>(batch_images));
        }
      } else {
        window_losses.losses.push_back(loss.detach());
        window_losses.steps.push_back(step + 1);
        if (scaler.enabled()) window_losses.scales.push_back(scaler.scale_tensor().clone());
        if (!runner->SumsLosses()) {
          loss_sum.add_(loss.detach(), static_cast<double>(batch_images));
          loss_images.add_(static_cast<double>(batch_images));
        }
      }
      images_seen += batch_images;
      window_images += batch_images;
      ++micro;
      if (!last_micro) continue;
      faults.AfterBackward(step + 1, world.rank);
      runner->FinishStep(step_nonfinite, timeline);
      step_nonfinite = torch::Tensor();
      ++step;
      ++epoch_steps;
      ++window_steps;
      WorkerStatus::Current().SetStep(step, epoch);
      // Every rank, every step (at times a collective): before a test's hang-at-step, whose rank
      // stands for one stuck in its next step's gradient all-reduce.
      std::optional<StopRequest> stop_request = stop_agreement.AtStepBoundary();
      faults.AfterStep(log, step, world.rank);

      if (step % log_every == 0 || epoch_steps == steps_per_epoch) {
        DeferredRows::HostPart row;
        row.metrics.step = step;
        row.metrics.epoch = epoch;
        row.metrics.lr = optimizer.lr();
        row.metrics.data_wait_seconds = window_wait / static_cast<double>(window_steps);
        row.steps = window_steps;
        row.images = window_images * world.world_size;
        rows.Add(std::move(row), loss, scaler.scale_tensor(), timeline.Cut(), std::move(window_losses));
        window_losses = {};
        window_wait = 0;
        window_steps = 0;
        window_images = 0;
      }
      write_completed_rows(/*wait=*/false, epoch_phases);
      scheduler.OnStep();
      optimizer.set_lr(scheduler.lr());
      // On a CPU the step's loss is there to read; elsewhere reading it would wait for the device.
      const std::optional<double> shown_loss =
          last_loss || !device.is_cpu() ? last_loss : std::optional<double>(loss.item<double>());
      progress.Update(epoch_steps, shown_loss,
                      static_cast<double>((images_seen - images_before) * world.world_size) / SecondsSince(epoch_start));
      stop = config.max_steps > 0 && step >= config.max_steps;
      // A stop signal ends the run here, unless the run's last step or the epoch's (stopped after
      // its evaluation, below) is done.
      if (stop || micro == micro_batches_per_epoch) stop_request.reset();
      // Mid-epoch checkpoints; the epoch's last step is saved after its evaluation instead.
      if (micro < micro_batches_per_epoch &&
          (checkpoints.DueAfterStep(step) || (stop && checkpoints.enabled()) || stop_request)) {
        const std::string path =
            write_checkpoint(TrainingPosition{epoch, step, epoch_steps, micro, images_seen, {}, {}, {}});
        if (stop_request) interrupted_checkpoint = path;
      }
      const std::string trace = profiler.AfterStep(step);
      if (!trace.empty()) log.info("trace of steps {} written to {}", config.profile_steps, trace);
      interrupted = stop_request;
      if (stop || interrupted) break;
    }
    if (interrupted) {  // the epoch's evaluation is not worth the wait
      progress.EndEpoch();
      break;
    }
    check_all_losses(epoch, epoch_phases);  // including the steps after the last row (--max-steps)
    const TimelineWindow rest = timeline.Cut();
    epoch_phases.device += rest.Seconds();
    epoch_phases.host += rest.HostSeconds();
    // The epoch's loss over every rank's images (item() also waits for the device); NaN when
    // every step of the epoch was skipped, reported as diverged below.
    torch::Tensor totals = torch::stack({loss_sum, loss_images});
    ranks.Sum(totals, "epoch loss");
    totals = totals.cpu();
    const double train_loss = totals[0].item<double>() / totals[1].item<double>();
    // The images this process trained: a resumed epoch's time starts at the checkpoint.
    const double global_images = static_cast<double>((images_seen - images_before) * world.world_size);
    const double epoch_seconds = SecondsSince(epoch_start);
    progress.EndEpoch();

    WorkerStatus::Current().SetPhase("evaluating");
    const auto eval_start = Clock::now();
    const Evaluation eval = Evaluate(*model, data.test, config.eval_batch_size, config.eval_max_samples,
                                     data.memory ? 0 : static_cast<int>(config.num_workers), device, precision,
                                     world.rank, ranks, channels_last);
    const double eval_seconds = SecondsSince(eval_start);
    report_skipped_images();
    if (!std::isfinite(train_loss)) {
      record_scaler();
      throw DivergedError(fmt::format("training loss became {} in epoch {} (step {}){}; lower --lr",
                                      Real{train_loss}, epoch + 1, step,
                                      skip_nonfinite ? ": every step of the epoch had a non-finite loss" : ""));
    }
    // Skipping steps keeps non-finite updates out of the weights, but not a model that is broken
    // anyway: weights grown until float16 overflows in the forward pass, or a loss scale that
    // backed off to 0 and can never grow again. Such a run would otherwise end with exit 0.
    if (!std::isfinite(eval.loss) || (scaler.enabled() && scaler.scale() == 0)) {
      record_scaler();
      const std::string skipped = fmt::format("{} steps skipped so far", summary["skipped_steps"].get<int64_t>());
      throw DivergedError(
          std::isfinite(eval.loss)
              ? fmt::format("the dynamic loss scale fell to 0 in epoch {} (step {}, {}): every scaled gradient "
                            "overflowed, and a scale of 0 cannot grow again; lower --lr, or use --precision amp-bf16",
                            epoch + 1, step, skipped)
              : fmt::format("test loss became {} after epoch {} (step {}, {}): the model's outputs are no longer "
                            "finite; lower --lr{}", Real{eval.loss}, epoch + 1, step, skipped,
                            ModelDtype(precision) == torch::kHalf || AutocastDtype(precision) == torch::kHalf
                                ? ", or use --precision amp-bf16 (float16's range ends at 65504)" : ""));
    }

    const PhaseSeconds& device_phases = epoch_phases.device;
    const double comm_wait = device_phases[StepPhase::kExposedComm];
    nlohmann::json phase_seconds = PhaseJson(device_phases);
    // All-reduces (and the evaluation's) in device time, hidden or not: with exposed_comm, how
    // much of the communication backward hid.
    // Not with a graphed step: its replayed all-reduces are in the graph's time, not in this.
    const bool collectives_timed = communicator && !(graphed && graphed->captured());
    if (const auto collective_seconds = collectives_timed ? communicator->CompletedCollectiveSeconds() : std::nullopt) {
      phase_seconds["collectives_total"] = *collective_seconds - collective_seconds_before;
    }
    summary["epochs_detail"].push_back({
        {"epoch", epoch},
        {"train_loss", train_loss},
        {"seconds", epoch_seconds},
        {"images_per_second", global_images / epoch_seconds},
        {"data_wait_seconds", data_wait},
        {"compute_seconds", epoch_seconds - data_wait - comm_wait},
        {"comm_seconds", comm_wait},
        {"phase_seconds", phase_seconds},
        {"host_phase_seconds", PhaseJson(epoch_phases.host)},
        {"steps", epoch_steps},
        {"eval_seconds", eval_seconds},
        {"test_loss", eval.loss},
        {"test_accuracy", eval.accuracy},
    });
    summary["test_loss"] = eval.loss;
    summary["test_accuracy"] = eval.accuracy;
    summary["eval_samples"] = eval.samples;
    summary["per_class_accuracy"] = eval.per_class_accuracy;
    outputs.AddScalar("train/epoch_loss", train_loss, step);
    outputs.AddScalar("test/loss", eval.loss, step);
    outputs.AddScalar("test/accuracy", eval.accuracy, step);
    // One process on one device communicates nothing: no all-reduce time to speak of.
    const std::string comm_text =
        communicator || data_parallel ? fmt::format(", {:.1f} s for all-reduces", comm_wait) : "";
    log.info("epoch {}/{}: train loss {:.4f}, test loss {:.4f}, test accuracy {:.2f}%, {:.1f} s "
             "({:.1f} s waiting for data{}), {:.0f} img/s",
             epoch + 1, config.epochs, train_loss, eval.loss, eval.accuracy, epoch_seconds, data_wait, comm_text,
             global_images / epoch_seconds);
    if (eval.samples < data.test->size()) {
      log.info("epoch {}/{}: test loss and accuracy of {} of the {} test images (--eval-max-samples)", epoch + 1,
               config.epochs, eval.samples, data.test->size());
    }
    const double per_step_ms = 1000.0 / static_cast<double>(std::max<int64_t>(epoch_steps, 1));
    auto phases_text = [&](const PhaseSeconds& phases) {
      const std::string comm = communicator || data_parallel
                                   ? fmt::format(", exposed communication {:.2f} ms",
                                                 phases[StepPhase::kExposedComm] * per_step_ms)
                                   : "";
      return fmt::format("input {:.2f} ms, forward {:.2f} ms, backward {:.2f} ms{}, optimizer {:.2f} ms",
                         phases[StepPhase::kInput] * per_step_ms, phases[StepPhase::kForward] * per_step_ms,
                         phases[StepPhase::kBackward] * per_step_ms, comm, phases[StepPhase::kOptimizer] * per_step_ms);
    };
    log.info("epoch {}/{} per step, {} time: {}{}", epoch + 1, config.epochs, device.is_cuda() ? "device" : "host",
             phases_text(device_phases),
             phase_seconds.contains("collectives_total")
                 ? fmt::format(" (collectives ran {:.2f} ms)", phase_seconds["collectives_total"].get<double>() * per_step_ms)
                 : "");
    // The host's side of the same steps: where it is about the device's, the steps wait for the host.
    if (device.is_cuda()) log.info("epoch {}/{} per step, host time: {}", epoch + 1, config.epochs, phases_text(epoch_phases.host));
    // A signal during the epoch's last step or its evaluation stops the run here, unless the run
    // is done.
    std::optional<StopRequest> stop_request = stop_agreement.AtEpochEnd();  // a collective, on every rank
    if (stop || epoch + 1 == config.epochs) stop_request.reset();
    if (micro == micro_batches_per_epoch) {  // a whole epoch, not one cut short by --max-steps
      scheduler.OnEpochEnd(eval.loss);
      optimizer.set_lr(scheduler.lr());
      if (checkpoints.enabled() || stop_request) {
        loss_sum.zero_();
        loss_images.zero_();
        const std::string path = write_checkpoint(TrainingPosition{epoch + 1, step, 0, 0, 0, {}, {}, {}});
        if (stop_request) interrupted_checkpoint = path;
      }
    }
    interrupted = stop_request;
  }

  WorkerStatus::Current().SetPhase("finishing");
  if (const std::string trace = profiler.Finish(); !trace.empty()) {
    log.info("trace of the steps profiled before the run ended written to {}", trace);
  }
  if (memory_snapshot) memory_snapshot->Write();
  record_scaler();
  const double checksum = ParamChecksum(*model);
  const std::vector<double> checksums = ranks.Gather(checksum, "parameter checksums");
  const std::vector<double> peaks = ranks.Gather(static_cast<double>(DevicePeakMemoryBytes(device)), "peak memory");
  const std::vector<double> device_indices = ranks.Gather(device.is_cuda() ? device.index() : -1, "devices");
  summary["devices"] = nlohmann::json::array();
  for (double index : device_indices) summary["devices"].push_back(index < 0 ? "cpu" : fmt::format("cuda:{}", index));
  summary["peak_memory_bytes"] = nlohmann::json::array();
  for (double peak : peaks) summary["peak_memory_bytes"].push_back(static_cast<long long>(peak));
  if (world.world_size > 1) summary["rank_param_checksums"] = checksums;
  if (data_parallel) data_parallel->Report(summary);  // every dp device, and dp_timing
  if (graphed) {
    summary["cuda_graphs"] = {{"captured", graphed->captured()},
                              {"replays", graphed->replays()},
                              {"eager_steps", graphed->eager_steps()}};
  }
  if (replicated) {
    summary["ddp_bucket_bytes"] = replicated->BucketBytes();
    summary["ddp_buckets_rebuilt"] = replicated->rebuilt();
  }
  // One copy of the weights unless more are asked for: --checkpoint's file is a second name of
  // model_state_dict.pt where one file system holds both, and model.pt only with --save-module.
  if (config.save_module && outputs.writes_shared_files()) torch::save(model, outputs.folder() + "/model.pt");
  if (config.save_state_dict || !checkpoint_path.empty()) {
    if (outputs.writes_shared_files()) {
      const std::string state_dict = SerializeStateDict(*model, optimizer.stepped_parameters());
      const std::string state_dict_path = outputs.folder() + "/" + kStateDictFile;
      if (config.save_state_dict) WriteFileAtomically(state_dict_path, state_dict);
      if (!checkpoint_path.empty() && config.save_state_dict) {
        LinkOrWriteAtomically(state_dict_path, checkpoint_path, state_dict);
      } else if (!checkpoint_path.empty()) {
        WriteFileAtomically(checkpoint_path, state_dict);
      }
    }
    if (config.save_state_dict) summary["state_dict_file"] = kStateDictFile;  // in the output folder
    if (!checkpoint_path.empty()) summary["checkpoint_file"] = checkpoint_path;
  }
  summary["steps"] = step;
  summary["final_lr"] = optimizer.lr();
  summary["param_checksum"] = checksum;
  summary["total_seconds"] = SecondsSince(run_start);
  if (interrupted) {
    RecordInterruption(*interrupted, step, interrupted_checkpoint, outputs, summary);
    return interrupted;
  }
  summary["status"] = "ok";
  // Without loss scaling the scale is 1 throughout: a final scale would say nothing.
  log.info("done: {} steps in {:.1f} s, test accuracy {:.2f}%, param_checksum {:.6f}, {} steps skipped{}", step,
           summary["total_seconds"].get<double>(), summary["test_accuracy"].get<double>(), checksum,
           summary["skipped_steps"].get<int64_t>(),
           scaler.enabled() ? fmt::format(", final loss scale {}", summary["final_loss_scale"].get<double>()) : "");
  return std::nullopt;
}

}  // namespace mgpu
