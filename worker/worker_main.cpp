// mgpu-worker: one training process. Runs alone, under `mgpu`, under mpirun or under torchrun.
// Exit codes: 0 success, 2 bad input, 3 training diverged, 128+N stopped by signal N (SIGINT,
// SIGTERM, SIGUSR1, SIGHUP: resumable, common/stop_signal.h), 1 anything else.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "common/stop_signal.h"
#include "config/command_line.h"
#include "data/decode_mode.h"
#include "dataparallel/dp_devices.h"
#include "ddp/rendezvous.h"
#include "ddp/world.h"
#include "models/model_factory.h"
#include "worker/coordinator_client.h"
#include "worker/cuda_work_queues.h"
#include "worker/numa_binding.h"
#include "worker/run_outputs.h"
#include "worker/test_faults.h"
#include "worker/train_config.h"
#include "worker/trainer.h"
#include "worker/worker_status.h"

namespace {

using namespace mgpu;

// c10::Error's what() carries a C++ backtrace; users need the message.
Status StatusOfCurrentException() {
  try {
    throw;
  } catch (const c10::Error& e) {
    return Status::Failure(e.what_without_backtrace());
  } catch (...) {
    return StatusFromCurrentException();
  }
}

// Every rank writes into rank 0's output folder (a default name holds a timestamp).
std::string AgreeOnFolder(Communicator& communicator, const std::string& mine, const torch::Device& device) {
  constexpr int64_t kMaxPath = 4096;
  if (mine.size() >= kMaxPath) throw BadInputError("--out: the path is longer than 4095 bytes");
  torch::Tensor bytes = torch::zeros({kMaxPath}, torch::kUInt8);
  std::memcpy(bytes.data_ptr<uint8_t>(), mine.data(), mine.size());
  bytes = bytes.to(device);
  communicator.Broadcast(bytes, 0, "output folder name")->WaitForHost();
  bytes = bytes.cpu();
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()));
}

// The output folder, unless --tensorboard false, and <--tensorboard-log>/<the output folder's name>.
std::vector<std::string> EventFolders(const TrainConfig& config) {
  std::vector<std::string> folders;
  if (config.tensorboard) folders.push_back(config.out);
  if (!config.tensorboard_log.empty()) {
    std::string run = config.out;
    while (run.size() > 1 && run.back() == '/') run.pop_back();
    folders.push_back(config.tensorboard_log + "/" + run.substr(run.rfind('/') + 1));
  }
  return folders;
}

struct ParsedCommandLine {
  TrainConfig config;
  WorldInfo world;
};

// Returns nullopt after printing help; throws BadInputError for bad flags or config files.
std::optional<ParsedCommandLine> ParseCommandLine(int argc, char** argv, int& exit_code) {
  std::optional<TrainConfig> config = ParseWorkerCommandLine(std::vector<std::string>(argv + 1, argv + argc), exit_code);
  if (!config) return std::nullopt;
  ParsedCommandLine parsed;
  parsed.config = *config;
  TestFaults::FromEnvironment().CheckApplies(parsed.config);
  WorldFlags flags;
  flags.rank = static_cast<int>(parsed.config.rank);
  flags.world_size = static_cast<int>(parsed.config.world_size);
  flags.local_rank = static_cast<int>(parsed.config.local_rank);
  flags.master_addr = parsed.config.master_addr;
  flags.master_port = static_cast<int>(parsed.config.master_port);
  parsed.world = ResolveWorld(flags, ProcessEnvironment());
  return parsed;
}


// Whose failure the exception being handled shows: a collective under way that lost a peer is
// the peer's (ddp/communicator.h), anything else this rank's.
coordinator::ErrorOrigin OriginOfCurrentException() {
  try {
    throw;
  } catch (const CollectiveError& e) {
    return e.fault() == CollectiveFault::kPeer ? coordinator::ERROR_ORIGIN_PEER : coordinator::ERROR_ORIGIN_THIS_RANK;
  } catch (...) {
    return coordinator::ERROR_ORIGIN_THIS_RANK;
  }
}

// What the coordinator of `mgpu run` learns at the end: the exit code and error, or the result
// (a run that failed before it trained or evaluated has none: NaN accuracy, 0 steps).
coordinator::FinishRequest Outcome(const Status& status, const RunSummary& summary,
                                   coordinator::ErrorOrigin origin = coordinator::ERROR_ORIGIN_THIS_RANK) {
  coordinator::FinishRequest outcome;
  outcome.set_exit_code(status.exit_code());
  outcome.set_error(status.ok() ? "" : status.ToString());
  if (!status.ok()) outcome.set_error_origin(origin);
  outcome.set_total_seconds(summary.total_seconds.value_or(0.0));
  outcome.set_steps(summary.steps.value_or(0));
  outcome.set_test_accuracy(summary.test_accuracy.value_or(std::nan("")));
  if (!summary.epochs_detail.empty()) outcome.set_images_per_second(summary.LastImagesPerSecond());
  return outcome;
}

// What the process sets up before any output exists: the device, the coordinator of `mgpu run`
// (when it started this worker) and, for DDP, the job's ranks.
struct JoinedJob {
  torch::Device device = torch::kCPU;
  std::unique_ptr<CoordinatorClient> coordinator_client;
  coordinator::Assignment assignment;
  std::unique_ptr<Communicator> communicator;
  std::string rendezvous;   // how the ranks joined, for the log
  std::string config_yaml;  // config.yaml's text: the precision that runs, under the name as given
  std::string work_queues;  // the log's line on CUDA's work queues (worker/cuda_work_queues.h), or ""
  std::string cpu_binding;  // the log's line on --numa-binding (worker/numa_binding.h), or ""
};

// Settles `config` for the device (and, for DDP, rank 0's output folder). Throws; the caller
// reports to the coordinator when `joined.coordinator_client` is set.
void JoinJob(TrainConfig& config, const WorldInfo& world, const std::string& given_name, JoinedJob& joined) {
  // --mode dp trains on the first of --dp-devices (the primary).
  joined.device = config.mode == Mode::kDp ? ResolveDataParallelDevices(config.dp_devices, config.device,
                                                                    static_cast<int>(torch::cuda::device_count()))
                                            .front()
                                      : ResolveDevice(config.device, world);
  ResolvePrecisionForDevice(config, joined.device.is_cuda());
  // Before the coordinator's, NCCL's and the loader's threads start: they inherit it.
  joined.cpu_binding = ApplyNumaBinding(config.numa_binding, joined.device, world);
  // The precision that runs (--amp on CPU is amp-bf16), under the name as given.
  TrainConfig as_saved = config;
  as_saved.name = given_name;
  joined.config_yaml = ConfigToYaml(as_saved);
  joined.coordinator_client = CoordinatorClient::FromEnvironment(ProcessEnvironment());
  if (joined.coordinator_client) {
    joined.assignment = joined.coordinator_client->Register(world, joined.device.str());
    WorkerStatus::Current().SetPhase("joining ranks");
    joined.coordinator_client->StartHeartbeats(
        std::chrono::milliseconds(joined.assignment.heartbeat_interval_ms()),
        std::chrono::milliseconds(joined.assignment.heartbeat_timeout_ms()),
        [](const std::string& reason) { WorkerStatus::Current().StopTraining(reason); });
  }
  if (config.mode != Mode::kDdp) return;
  const std::string backend = config.backend == "auto" ? DefaultBackend(joined.device) : config.backend;
  NcclOptions nccl;
  nccl.max_ctas = static_cast<int>(config.nccl_max_ctas);
  // Above the step's stream where that is at high priority (cuda/step_stream.h).
  nccl.high_priority_stream = MayDecodeOnGpu(ParseDecodeMode(config.decode), joined.device.is_cuda(), false);
  RendezvousResult ranks = Rendezvous(world, backend, joined.device,
                                      std::chrono::milliseconds(static_cast<int64_t>(config.collective_timeout * 1000)),
                                      nccl);
  joined.communicator = std::move(ranks.communicator);
  joined.rendezvous = ranks.description;
  config.out = AgreeOnFolder(*joined.communicator, config.out, joined.device);
}

// Trains, writes summary.json and returns the run's status; `summary` and `interrupted` say how
// it ended, `origin` whose failure it was.
Status TrainAndSummarize(const TrainConfig& config, const WorldInfo& world, JoinedJob& joined, RunOutputs& outputs,
                         RunSummary& summary, std::optional<StopRequest>& interrupted,
                         coordinator::ErrorOrigin& origin) {
  Status status;
  const auto start = std::chrono::steady_clock::now();
  try {
    outputs.log().info("mgpu-worker started (pid {}), rank source: {}", ::getpid(), world.source);
    if (joined.coordinator_client) {
      const coordinator::Assignment& assignment = joined.assignment;
      outputs.log().info("registered with the coordinator at {}: rank {} of {} (attempt {}), rendezvous at {}:{}",
                         joined.coordinator_client->address(), assignment.rank(), assignment.world_size(),
                         assignment.attempt(), assignment.master_addr(), assignment.master_port());
    }
    if (joined.communicator) outputs.log().info("ranks joined: {}", joined.rendezvous);
    if (!joined.work_queues.empty()) outputs.log().info("{}", joined.work_queues);
    if (!joined.cpu_binding.empty()) outputs.log().info("{}", joined.cpu_binding);
    outputs.WriteConfig(joined.config_yaml);
    WorkerStatus::Current().SetPhase("loading data");
    interrupted = Train(config, world, joined.device, joined.communicator.get(), outputs, summary);
  } catch (...) {
    status = StatusOfCurrentException();
    origin = OriginOfCurrentException();
    summary.status = "failed";
    summary.error = status.ToString();
    summary.exit_code = status.exit_code();
    summary.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    outputs.log().error("{}", status.ToString());
  }
  try {
    outputs.WriteSummary(summary.ToJson());
  } catch (...) {
    const Status write_status = StatusOfCurrentException();
    outputs.log().error("cannot write summary.json: {}", write_status.message());
    if (status.ok()) status = write_status;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  InstallStopSignalHandlers();  // before any thread starts; the loop acts on them at a step boundary
  std::optional<ParsedCommandLine> parsed;
  try {
    int exit_code = 0;
    parsed = ParseCommandLine(argc, argv, exit_code);
    if (!parsed) return exit_code;
  } catch (...) {
    const Status status = StatusOfCurrentException();
    std::fprintf(stderr, "mgpu-worker: %s\n", status.ToString().c_str());
    return status.exit_code();
  }
  TrainConfig& config = parsed->config;
  const WorldInfo& world = parsed->world;
  // config.yaml keeps the name as given: a name derived below from the model, mode and precision
  // would not follow an edit of config.yaml's precision.
  const std::string given_name = config.name;
  if (config.out.empty()) config.out = DefaultOutputFolder(config);
  JoinedJob joined;
  // Before JoinJob's first CUDA call (worker/cuda_work_queues.h).
  const WorkQueuesChoice work_queues =
      ChooseWorkQueues(MayDecodeOnGpu(ParseDecodeMode(config.decode), config.device != "cpu", config.mode == Mode::kDp),
                       ProcessEnvironment());
  ApplyWorkQueues(work_queues);
  joined.work_queues = work_queues.note;
  try {
    JoinJob(config, world, given_name, joined);
  } catch (...) {
    const Status status = StatusOfCurrentException();
    const coordinator::ErrorOrigin origin = OriginOfCurrentException();
    std::fprintf(stderr, "mgpu-worker (rank %d): %s\n", world.rank, status.ToString().c_str());
    if (joined.communicator) joined.communicator->Abandon();
    if (joined.coordinator_client) joined.coordinator_client->Finish(Outcome(status, RunSummary{}, origin));
    return status.exit_code();
  }
  if (config.name.empty()) config.name = fmt::format("{}-{}-{}", ModelLabel(config.model), config.mode, config.precision);

  std::unique_ptr<RunOutputs> outputs;
  try {
    outputs = std::make_unique<RunOutputs>(config.out, world.rank, EventFolders(config));
  } catch (...) {
    const Status status = StatusOfCurrentException();
    std::fprintf(stderr, "mgpu-worker: cannot write the output folder: %s\n", status.message().c_str());
    if (joined.communicator) joined.communicator->Abandon();
    if (joined.coordinator_client) joined.coordinator_client->Finish(Outcome(status, RunSummary{}));
    return status.exit_code();
  }
  // --overwrite: the old run's checkpoints must not be resumed as this run's (a restart of
  // `mgpu run` resumes from checkpoints/latest.ckpt).
  if (config.overwrite && config.resume.empty() && world.rank == 0) RemoveTree(config.out + "/checkpoints");
  RunSummary summary = SummaryFromConfig(config, world);
  std::optional<StopRequest> interrupted;
  coordinator::ErrorOrigin origin = coordinator::ERROR_ORIGIN_THIS_RANK;
  const Status status = TrainAndSummarize(config, world, joined, *outputs, summary, interrupted, origin);
  // The peers may wait in a collective this rank will never join; its exit tells the launcher.
  if (!status.ok() && joined.communicator) joined.communicator->Abandon();
  if (status.ok()) outputs->log().info("outputs in {}", outputs->folder());
  coordinator::FinishRequest outcome = Outcome(status, summary, origin);
  if (status.ok() && interrupted) {
    outcome.set_exit_code(128 + interrupted->signal);
    outcome.set_error(fmt::format("interrupted by {} at step {}", SignalName(interrupted->signal),
                                  summary.steps.value_or(0)));
  }
  if (joined.coordinator_client) joined.coordinator_client->Finish(outcome);
  return status.ok() && interrupted ? 128 + interrupted->signal : status.exit_code();
}
