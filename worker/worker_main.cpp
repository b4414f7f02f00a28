// mgpu-worker: one training process. Runs alone, under `mgpu`, under mpirun or under torchrun.
// Exit codes: 0 success, 2 bad input, 3 training diverged, 1 anything else.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "dataparallel/dp_devices.h"
#include "ddp/rendezvous.h"
#include "ddp/world.h"
#include "worker/run_outputs.h"
#include "worker/train_config.h"
#include "worker/trainer.h"

namespace {

using namespace mgpu;

std::string DefaultOutputFolder(const TrainConfig& config) {
  const std::string base = fmt::format("runs/{}-{}-{}-{}", TimestampForPath(), config.model,
                                       config.dataset, config.mode);
  std::string folder = base;
  for (int i = 2; PathExists(folder); ++i) folder = fmt::format("{}-{}", base, i);
  return folder;
}

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
  communicator.Broadcast(bytes, 0, "output folder name")->Wait();
  bytes = bytes.cpu();
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()));
}

struct ParsedCommandLine {
  TrainConfig config;
  WorldInfo world;
};

// Returns nullopt after printing help; throws BadInputError for bad flags or config files.
std::optional<ParsedCommandLine> ParseCommandLine(int argc, char** argv, int& exit_code) {
  CLI::App app{"mgpu-worker: one training process of an mgpu job.\n"
               "Options can also be set in a YAML file given by --config; flags win."};
  app.get_formatter()->column_width(32);
  std::string config_file;
  app.add_option("--config", config_file, "YAML file of options (keys as the flags, without --)");
  const auto& specs = TrainOptions();
  std::vector<std::string> values(specs.size());
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string names = "--" + specs[i].name;
    for (const auto& alias : specs[i].aliases) names += ",--" + alias;
    std::string help = specs[i].help;
    if (!specs[i].choices.empty()) help += fmt::format(" ({})", fmt::join(specs[i].choices, " | "));
    help += fmt::format(" [{}]", specs[i].get(TrainConfig{}));
    // A repeated flag takes its last value, as with argparse.
    options.push_back(app.add_option(names, values[i], help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast));
    // Yes/no options work as plain flags too (`--amp` means `--amp true`).
    if (specs[i].choices == std::vector<std::string>{"true", "false"}) options.back()->expected(0, 1);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    exit_code = app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    throw BadInputError(fmt::format("{}; run `mgpu-worker --help` for the options", e.what()));
  }

  ParsedCommandLine parsed;
  if (!config_file.empty()) {
    ApplyYamlFile(parsed.config, config_file);
    parsed.config.config_file = config_file;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (options[i]->count() == 0) continue;
    try {
      specs[i].set(parsed.config, values[i].empty() && options[i]->get_expected_min() == 0 ? "true" : values[i]);
    } catch (const BadInputError& e) {
      throw BadInputError(fmt::format("--{}: {}", specs[i].name, e.what()));
    }
  }
  ResolvePrecisionAliases(parsed.config);
  ValidateConfig(parsed.config);
  WorldFlags flags;
  flags.rank = static_cast<int>(parsed.config.rank);
  flags.world_size = static_cast<int>(parsed.config.world_size);
  flags.local_rank = static_cast<int>(parsed.config.local_rank);
  flags.master_addr = parsed.config.master_addr;
  flags.master_port = static_cast<int>(parsed.config.master_port);
  parsed.world = ResolveWorld(flags, ProcessEnvironment());
  return parsed;
}

}  // namespace

int main(int argc, char** argv) {
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
  if (config.out.empty()) config.out = DefaultOutputFolder(config);
  if (config.name.empty()) config.name = fmt::format("{}-{}-{}", config.model, config.mode, config.precision);

  // Process-level set-up before any output exists: the device and, for DDP, the job's ranks.
  std::optional<torch::Device> device;
  std::unique_ptr<Communicator> communicator;
  std::string rendezvous;
  try {
    // --mode dp trains on the first of --dp-devices (the primary).
    device = config.mode == "dp" ? ResolveDataParallelDevices(config.dp_devices, config.device,
                                                              static_cast<int>(torch::cuda::device_count()))
                                       .front()
                                 : ResolveDevice(config.device, world);
    if (config.mode == "ddp") {
      const std::string backend = config.backend == "auto" ? DefaultBackend(*device) : config.backend;
      RendezvousResult joined = Rendezvous(world, backend, *device,
                                           std::chrono::milliseconds(static_cast<int64_t>(config.collective_timeout * 1000)),
                                           static_cast<int>(config.nccl_max_ctas));
      communicator = std::move(joined.communicator);
      rendezvous = joined.description;
      config.out = AgreeOnFolder(*communicator, config.out, *device);
    }
  } catch (...) {
    const Status status = StatusOfCurrentException();
    std::fprintf(stderr, "mgpu-worker (rank %d): %s\n", world.rank, status.ToString().c_str());
    return status.exit_code();
  }

  std::unique_ptr<RunOutputs> outputs;
  try {
    outputs = std::make_unique<RunOutputs>(config.out, world.rank);
  } catch (...) {
    const Status status = StatusOfCurrentException();
    std::fprintf(stderr, "mgpu-worker: cannot write the output folder: %s\n", status.message().c_str());
    return status.exit_code();
  }
  nlohmann::json summary = SummaryFromConfig(config, world);
  Status status;
  const auto start = std::chrono::steady_clock::now();
  try {
    outputs->log().info("mgpu-worker started (pid {}), rank source: {}", ::getpid(), world.source);
    if (communicator) outputs->log().info("ranks joined: {}", rendezvous);
    outputs->WriteConfig(ConfigToYaml(config));
    Train(config, world, *device, communicator.get(), *outputs, summary);
  } catch (...) {
    status = StatusOfCurrentException();
    summary["status"] = "failed";
    summary["error"] = status.ToString();
    summary["exit_code"] = status.exit_code();
    summary["total_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    outputs->log().error("{}", status.ToString());
  }
  try {
    outputs->WriteSummary(summary);
  } catch (...) {
    const Status write_status = StatusOfCurrentException();
    outputs->log().error("cannot write summary.json: {}", write_status.message());
    if (status.ok()) status = write_status;
  }
  if (status.ok()) outputs->log().info("outputs in {}", outputs->folder());
  return status.exit_code();
}
