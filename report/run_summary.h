// summary.json as typed records: the one place its keys are spelt. docs/RUN_FOLDER.md is the
// contract; these records follow it field by field. Writers (the worker, the launcher) fill a
// RunSummary and write ToJson(); readers (mgpu compare, its reports, mgpu serve) take
// RunSummaryFromJson() of what they read.
//
//   RunSummary summary = SummaryFromConfig(config, world);  // the worker: what the configuration says
//   summary.test_accuracy = 91.3;                           // ... what the run finds
//   WriteFileAtomically(path, summary.ToJson().dump(2));
//
// Unset optionals follow the contract: a field "present in every run" is written as null until
// it is known (a run that failed early), a field "present only in some runs" is left out.
// Reading is lenient, because the file may come from an older version, a killed run or a user:
// a field that is absent or of another type stays unset; nothing throws.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mgpu {

// One epoch of training and its evaluation (summary.json's epochs_detail[]). The worker sets
// every field; a number a file read lacks is NaN (a report shows "-" for it, not 0).
struct EpochRecord {
  static constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

  int64_t epoch = 0;  // 0-based
  double train_loss = kAbsent;
  double seconds = kAbsent;  // the epoch's training, evaluation excluded
  double images_per_second = kAbsent;
  double data_wait_seconds = kAbsent;
  double compute_seconds = kAbsent;
  double comm_seconds = kAbsent;
  std::map<std::string, double> phase_seconds;       // device time per step phase (and collectives_total)
  std::map<std::string, double> host_phase_seconds;  // the same phases on the host
  int64_t steps = 0;
  double eval_seconds = kAbsent;
  double test_loss = kAbsent;
  double test_accuracy = kAbsent;  // percent
};

// A run stopped by a signal at a step boundary.
struct InterruptionRecord {
  std::string signal;  // e.g. SIGTERM
  int signal_number = 0;
  int rank = 0;        // the rank that received it
  int64_t step = 0;    // the common step every rank stopped at
  std::string checkpoint;  // to --resume from
};

// --cuda-graphs: whether the step was captured, and how often it was replayed.
struct CudaGraphsRecord {
  bool captured = false;
  int64_t replays = 0;
  int64_t eager_steps = 0;
};

// --decode gpu: images nvJPEG decoded, those the CPU threads decoded beside it, and those sent to
// the CPU path, by reason.
struct GpuDecodeRecord {
  int64_t images = 0;
  int64_t cpu_assisted = 0;
  int64_t cpu_fallbacks = 0;
  std::map<std::string, int64_t> fallback_reasons;
};

// --mode dp: the per-phase times of the DataParallel step.
struct DataParallelTiming {
  std::string clock;  // cuda-events | host
  std::vector<std::string> devices;
  std::vector<double> forward_seconds;   // per device
  std::vector<double> backward_seconds;  // per device
  double reduce_seconds = 0;
  double step_seconds = 0;
  double broadcast_seconds = 0;
  int64_t forward_backward_calls = 0;
  int64_t broadcasts = 0;
};

struct RunSummary {
  // How it ended.
  std::string name;
  std::string status = "failed";  // ok | failed | interrupted
  std::string error;
  std::optional<int> exit_code;   // only when not ok
  std::optional<InterruptionRecord> interrupted;

  // The configuration, as resolved.
  std::string model, dataset, mode, optimizer, precision;
  std::string backend = "none";
  std::string loss_scale_mode = "none";
  int64_t world_size = 1;
  int64_t batch_size = 0;
  int64_t num_workers = 0;
  int64_t epochs = 0;
  int64_t max_steps = 0;
  int64_t seed = 0;
  double lr = 0;
  std::string rendezvous_source;

  // What set-up resolved.
  std::vector<std::string> devices;
  std::optional<std::string> data_loading;  // memory | stream
  std::optional<std::string> decode;        // cpu | gpu
  std::optional<int64_t> train_samples, test_samples;
  std::optional<std::vector<std::string>> class_names;
  std::optional<nlohmann::json> input;  // the input recipe (worker/input_recipe.h spells its fields)
  std::optional<bool> channels_last;
  std::optional<int64_t> parameters;
  std::optional<std::string> cpu_capability;
  std::optional<double> effective_lr;
  std::optional<std::string> resumed_from;

  // What the run found.
  int64_t skipped_images = 0;
  std::optional<double> total_seconds;  // SummaryFromConfig starts it at 0
  std::optional<int64_t> steps;
  std::optional<double> final_lr;
  std::optional<double> test_accuracy, test_loss;
  std::optional<int64_t> eval_samples;  // with --eval-max-samples
  std::vector<double> per_class_accuracy;
  std::vector<int64_t> peak_memory_bytes;  // one per device
  int64_t skipped_steps = 0;
  double final_loss_scale = 1.0;
  std::optional<double> param_checksum;
  std::optional<std::vector<double>> rank_param_checksums;  // world size > 1
  std::vector<EpochRecord> epochs_detail;
  std::optional<GpuDecodeRecord> gpu_decode;
  std::optional<CudaGraphsRecord> cuda_graphs;
  std::optional<std::vector<int64_t>> ddp_bucket_bytes;
  std::optional<bool> ddp_buckets_rebuilt;
  std::optional<std::string> dp_impl, dp_comm;
  std::optional<DataParallelTiming> dp_timing;

  // The weights.
  std::optional<std::string> state_dict_file;  // relative to the run folder
  std::optional<std::string> checkpoint_file;

  // Under `mgpu run`: the launcher's record (launcher/run/job_summary.h spells its fields).
  std::optional<nlohmann::json> launcher;

  nlohmann::json ToJson() const;

  // The last epoch's images per second; NaN when no epoch finished.
  double LastImagesPerSecond() const {
    return epochs_detail.empty() ? EpochRecord::kAbsent : epochs_detail.back().images_per_second;
  }
};

struct TrainConfig;  // config/train_config.h
struct WorldInfo;    // ddp/world.h

// The contract's fields that come from the configuration alone, the rest at their defaults
// (status "failed"): the worker's record before it trains, and `mgpu run`'s when rank 0 wrote none.
RunSummary SummaryFromConfig(const TrainConfig& config, const WorldInfo& world);

// The record of `json` (lenient: see the top of this file). A non-object gives a default record.
RunSummary RunSummaryFromJson(const nlohmann::json& json);

nlohmann::json EpochRecordsToJson(const std::vector<EpochRecord>& epochs);
// nullopt unless `json` is a list of objects (each read leniently, as RunSummaryFromJson).
std::optional<std::vector<EpochRecord>> EpochRecordsFromJson(const nlohmann::json& json);

}  // namespace mgpu
