#include "launcher/serve/job_submission.h"

#include <cstdlib>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "config/dataset_names.h"
#include "launcher/run/run_job.h"

namespace mgpu {
namespace {

void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// The checks that depend on the service's devices, before the worker flags are final.
void CheckDevices(const TrainConfig& config, int gpus, const DeviceSlots& slots) {
  if (gpus < 1 || gpus > slots.count()) {
    throw BadInputError(fmt::format("--gpus {}: this service owns {} device(s) ({}); ask for 1 to {}", gpus,
                                    slots.count(), fmt::join(slots.names, ","), slots.count()));
  }
  if (config.mode == Mode::kSingle && gpus > 1) {
    throw BadInputError(fmt::format("--gpus {} with mode single: one process trains on one device; ask for --gpus 1, "
                                    "or set mode: ddp (a process per device) or mode: dp (one process, every device)",
                                    gpus));
  }
  if (config.mode == Mode::kDp && gpus < 2) {
    throw BadInputError("mode dp splits each batch over several devices: ask for --gpus 2 or more, or use mode single");
  }
  if (!slots.cuda && config.device != "auto" && config.device != "cpu") {
    throw BadInputError(fmt::format("device: {}: this service's devices are CPU slots; use device: cpu (or auto)",
                                    config.device));
  }
  if (slots.cuda && config.device.rfind("cuda:", 0) == 0 &&
      std::strtoll(config.device.c_str() + 5, nullptr, 10) >= gpus) {
    throw BadInputError(fmt::format("device: {}: the job sees its {} GPU(s) as cuda:0 to cuda:{}; use device: cuda",
                                    config.device, gpus, gpus - 1));
  }
}

}  // namespace

void CheckDataFiles(const TrainConfig& config) {
  if (config.dataset == "synthetic") return;
  const std::string folder = config.data_dir.empty() ? DefaultDataDir(config.dataset) : config.data_dir;
  if (!IsDirectory(folder)) {
    throw BadInputError(fmt::format("data folder {} (data set {}) does not exist on the service's host; point "
                                    "data-dir at the folder there",
                                    folder, config.dataset));
  }
  std::vector<std::string> missing;
  if (config.dataset == "fashion-mnist" || config.dataset == "mnist") {
    for (const char* stem : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                             "t10k-labels-idx1-ubyte"}) {
      const std::string raw = folder + "/" + stem;
      if (!PathExists(raw) && !PathExists(raw + ".gz")) missing.push_back(std::string(stem) + "[.gz]");
    }
  } else if (config.dataset == "cifar10") {
    const std::string dir = !PathExists(folder + "/data_batch_1.bin") && IsDirectory(folder + "/cifar-10-batches-bin")
                                ? folder + "/cifar-10-batches-bin"
                                : folder;
    for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                             "data_batch_5.bin", "test_batch.bin"}) {
      if (!PathExists(dir + "/" + name)) missing.push_back(name);
    }
  } else if (config.dataset == "imagefolder") {
    for (const char* split : {"train", "test"}) {
      if (!IsDirectory(folder + "/" + split)) missing.push_back(std::string(split) + "/");
    }
  }
  if (!missing.empty()) {
    throw BadInputError(fmt::format("data set {}: {} missing in {} on the service's host", config.dataset,
                                    fmt::join(missing, ", "), folder));
  }
}

JobRecord PrepareJob(int64_t id, const Submission& submission, const std::string& job_folder,
                     const DeviceSlots& slots, int64_t checkpoint_every, const PathPolicy& paths) {
  const std::string config_path = job_folder + "/submitted.yaml";
  const std::string run_folder = job_folder + "/run";
  try {
    MakeDirectories(job_folder);
    WriteFileAtomically(config_path, submission.config_yaml);
    std::vector<std::string> worker_args = {"--config", config_path, "--out", run_folder, "--progress", "lines"};
    const TrainConfig given = ParseJobWorkerConfig(worker_args);
    CheckJobPaths(given, job_folder, run_folder, paths);
    const std::vector<std::string> absolute = AbsolutePathFlags(given, job_folder);
    worker_args.insert(worker_args.end(), absolute.begin(), absolute.end());
    CheckDevices(given, submission.gpus, slots);
    if (!slots.cuda && given.device == "auto") worker_args.insert(worker_args.end(), {"--device", "cpu"});
    if (!slots.cuda && given.mode == Mode::kDp && given.dp_devices == "auto") {
      std::vector<std::string> replicas(static_cast<size_t>(submission.gpus), "cpu");
      worker_args.insert(worker_args.end(), {"--dp-devices", fmt::format("{}", fmt::join(replicas, ","))});
    }
    if (given.checkpoint_every == 0 && checkpoint_every > 0) {
      worker_args.insert(worker_args.end(), {"--checkpoint-every", std::to_string(checkpoint_every)});
    }
    if (!submission.resume_checkpoint.empty()) {
      worker_args.insert(worker_args.end(), {"--resume", submission.resume_checkpoint});
    }
    const TrainConfig config = ParseJobWorkerConfig(worker_args);
    CheckDataFiles(config);
    if (!config.resume.empty() && !PathExists(config.resume)) {
      throw BadInputError(fmt::format("resume: {} does not exist on the service's host", config.resume));
    }

    JobRecord job;
    job.id = id;
    job.config_yaml = submission.config_yaml;
    job.config_name = submission.config_name;
    job.model = config.model;
    job.dataset = config.dataset;
    job.mode = ModeName(config.mode);
    job.epochs = config.epochs;
    job.max_steps = config.max_steps;
    job.gpus = submission.gpus;
    job.world_size = config.mode == Mode::kDdp ? submission.gpus : 1;
    job.priority = submission.priority;
    job.worker_args = worker_args;
    job.resumes_job_id = submission.resumes_job_id;
    job.job_folder = job_folder;
    job.run_folder = run_folder;
    return job;
  } catch (const BadInputError& e) {
    RemoveTree(job_folder);
    std::string message = e.what();
    ReplaceAll(message, config_path, submission.config_name.empty() ? "the configuration" : submission.config_name);
    throw BadInputError(message);
  } catch (const Error&) {
    RemoveTree(job_folder);  // the service's own trouble (a folder it cannot write), not the client's
    throw;
  } catch (const std::exception& e) {
    // A parser's own exception on hostile input (e.g. a YAML key that is a list): still the client's.
    RemoveTree(job_folder);
    throw BadInputError(fmt::format("{}: the configuration cannot be read: {}",
                                    submission.config_name.empty() ? "the configuration" : submission.config_name,
                                    e.what()));
  }
}

}  // namespace mgpu
