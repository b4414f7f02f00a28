// The effective configuration of one training process, and the single table of options that
// the command line, YAML config files, config.yaml output and the start-up table all use.
// Without LibTorch, so that `mgpu` checks a job's worker flags without linking the training
// stack; worker/train_config.h adds the options of the worker's libraries built from it.
//
// Precedence: built-in defaults < the YAML file given by --config < command-line flags.
// Every option has a kebab-case name (`batch-size`); seed-style spellings (`batch_size`) are
// accepted as aliases in both flags and YAML. Unknown keys and bad values are BadInputError
// (exit 2) naming the key or flag, the value, and what is accepted.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/augment_options.h"
#include "config/choices.h"
#include "config/loss_scaling.h"
#include "config/precision.h"

namespace mgpu {

// In --checkpoint's folder: the run's output folder.
inline constexpr char kOutputFolderPlaceholder[] = "{out}";

// `path` with every kOutputFolderPlaceholder replaced by `output_folder`.
std::string WithOutputFolder(std::string path, const std::string& output_folder);

// --num-workers' bound. Loader threads mostly wait on file reads, so more of them than cores can
// help; past a few hundred they only add memory (each holds prefetched samples) and thread starts
// that a container's pids limit may refuse. A fixed bound keeps a config valid on every host.
inline constexpr int64_t kMaxLoaderThreads = 256;

// --threads' bound: this host's hardware threads (std::thread::hardware_concurrency; 256 where
// unknown). Intra-op threads compute; more of them than hardware threads only oversubscribe the
// cores, and OpenMP's spinning threads then slow every kernel and start ever more slowly.
int64_t MaxIntraOpThreads();

struct TrainConfig {
  std::string config_file;  // the YAML file the values came from, if any

  // Model and data.
  std::string model = "lenet";
  std::string dataset = "fashion-mnist";
  std::string data_dir;     // empty: the data set's default folder
  int64_t num_workers = 0;  // loader threads; 0 builds batches on the training thread; <= kMaxLoaderThreads
  int64_t image_size = 64;  // imagefolder: images are resized to this side; synthetic: the side
  std::string on_bad_image = "fail";  // imagefolder, webdataset: fail | skip
  std::string data_loading = "auto";  // auto | memory | stream (data/datasets.h: OpenDataset)
  std::string decode = "cpu";  // cpu | gpu | auto: where streamed JPEGs are decoded (data/decode_mode.h)
  bool cpu_assist = true;  // --decode gpu: the loader threads also decode samples (data/gpu_jpeg_batches.h)
  // Seed-style `--img_size N` (AlexNet's 227 px): 0 unless given; ResolveSeedSpellings folds it
  // into image_size, augment and resize.
  int64_t img_size = 0;
  int64_t synthetic_train = 50000;
  int64_t synthetic_test = 10000;
  int64_t synthetic_channels = 3;  // 1 (grayscale, as MNIST) or 3 (RGB)

  // Augmentation (config/augment_options.h, data/augment.h).
  std::string augment = "none";
  double affine_degrees = 10;
  double affine_translate = 0.1;
  double affine_scale_min = 0.9;
  double affine_scale_max = 1.1;
  std::string affine_interpolation = "nearest";
  int64_t crop_padding = 4;
  int64_t resize = 0;

  // Optimization.
  int64_t epochs = 1;
  int64_t max_steps = 0;    // stop after this many optimizer steps; 0: no limit
  int64_t batch_size = 32;  // global batch (the classic MNIST experiment's)
  double lr = 1e-3;
  std::string optimizer = "adam";
  double momentum = 0.0;    // SGD only
  bool nesterov = false;    // SGD only
  double weight_decay = 0.0;
  std::string scheduler = "none";     // optim/lr_scheduler.h
  std::vector<int64_t> milestones;    // multistep: epochs
  double gamma = 0.1;                 // multistep
  double warmup_epochs = 0;           // cosine: linear warm-up, in epochs (fractions allowed)
  double min_lr = 0;                  // cosine: final lr; plateau: floor
  double plateau_factor = 0.1;
  int64_t plateau_patience = 10;
  std::string lr_scale_rule = "none";  // linear: lr × global batch / 256
  double label_smoothing = 0;          // training loss only
  uint64_t seed = 42;

  // Execution.
  Mode mode = Mode::kSingle;
  std::string device = "auto";  // auto: cuda if available, else cpu
  Precision precision = Precision::kFp32;  // config/precision.h
  LossScaling loss_scale;                  // none | dynamic | a positive number (static scale)
  // Seed-style spelling of `precision` (`--dtype bf16 --amp`): "" and false unless given;
  // ResolveSeedSpellings folds them into `precision`.
  std::string dtype;
  bool amp = false;
  // Not options (never in config.yaml): the seed-style flags that chose `precision` ("--amp"; ""
  // when --precision or the default did), set by ResolveSeedSpellings; and, once the device is
  // known, ResolvePrecisionForDevice's note for the start-up table and warning for the log.
  std::string precision_spelling;
  std::string precision_note;
  std::string precision_warning;
  OnNonfinite on_nonfinite = OnNonfinite::kStop;  // a non-finite loss: stop (exit 3) or skip the step
  double grad_clip = 0;               // max gradient norm; 0: no clipping
  std::string memory_snapshot;        // CUDA allocator history pickle; empty: none
  std::string profile_steps;          // "FIRST-LAST" (config/profile_window.h); empty: none
  bool cuda_graphs = false;     // worker/graphed_step.h
  // models/memory_format.h: true or false as asked, nullopt ("auto") for ChooseChannelsLast's
  // rule (worker/channels_last_choice.h).
  std::optional<bool> channels_last;
  bool data_on_device = false;  // data/device_resident_batches.h
  // cuDNN's convolution algorithms: timed on the first batch of each shape (true, as PyTorch's
  // torch.backends.cudnn.benchmark = True) or chosen by cuDNN's heuristics (false).
  bool cudnn_benchmark = true;
  // mgpu's own fused CUDA kernels where a model has them (models/fused_kernels.h), or ATen's.
  bool fused_kernels = true;
  int64_t threads = 0;          // intra-op CPU threads; 0: LibTorch's default; <= MaxIntraOpThreads()
  NumaBinding numa_binding = NumaBinding::kNone;  // the CPUs near the rank's GPU (worker/numa_binding.h)
  int64_t eval_batch_size = 1000;
  int64_t eval_max_samples = 0;  // test images evaluated, spread over the test set; 0: all

  // Checkpoints (worker/checkpoint.h).
  int64_t checkpoint_every = 0;  // optimizer steps; 0: off (on: also at every epoch's end)
  std::string resume;            // a checkpoint file or a run folder; empty: a fresh run
  bool overwrite = false;        // a fresh run may replace the run already in --out

  // Distributed identity (flags override torchrun's and Open MPI's environment).
  int64_t rank = -1;
  int64_t world_size = -1;
  int64_t local_rank = -1;
  std::string master_addr;   // empty: MASTER_ADDR or 127.0.0.1
  int64_t master_port = -1;  // -1: MASTER_PORT or 29500

  // DDP.
  std::string backend = "auto";  // auto: nccl on GPUs, gloo on CPUs
  double bucket_cap_mb = 25;
  double last_bucket_cap_mb = 0;
  bool gradient_as_bucket_view = true;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  DdpCompression ddp_compression = DdpCompression::kNone;
  int64_t grad_accum = 1;           // micro-batches per optimizer step
  double collective_timeout = 600;  // seconds
  int64_t nccl_max_ctas = 0;        // thread blocks per NCCL collective; 0: NCCL's choice

  // DataParallel (--mode dp, dataparallel/).
  std::string dp_devices = "auto";  // dataparallel/dp_devices.h
  std::string dp_impl = "mgpu";     // mgpu | libtorch

  // Outputs.
  std::string out;          // empty: runs/<timestamp>-<model>-<dataset>-<mode>
  std::string name;         // short label for reports; empty: derived
  int64_t log_every = 0;    // optimizer steps between metrics.csv rows; 0: MetricsRowInterval's choice
  std::string progress = "auto";  // auto: a bar on a terminal, plain lines otherwise
  bool tensorboard = true;        // events.out.tfevents.* in the output folder
  bool save_state_dict = true;    // model_state_dict.pt for Python (worker/state_dict_export.h)
  bool save_module = false;       // model.pt: LibTorch's archive of the module, for C++
  std::string tensorboard_log;    // also write the events to <this>/<output folder's name>/
  // The seeds' `--checkpoint [DIR] --checkpoint_name NAME`: the trained weights (as
  // model_state_dict.pt) also written to DIR/NAME; "" none. `{out}` in DIR stands for the
  // output folder (a bare --checkpoint is `{out}`). NAME "" is <model label>.pth.
  std::string checkpoint;
  std::string checkpoint_name;

};

// What an option's value names on the file system, so that `mgpu serve` can confine every path
// a job names (launcher/serve/job_paths.h) without a list of options of its own.
enum class PathUse {
  kNone,        // not a path
  kReads,       // a file or folder the run reads
  kWrites,      // a file or folder the run creates or overwrites ({out} stands for the output folder)
  kLoadsModel,  // a user's model (torchscript:PATH, plugin:LIB.so:NAME): code the run loads
};

struct OptionSpec {
  std::string name;                  // kebab-case, e.g. "batch-size"
  std::vector<std::string> aliases;  // e.g. "batch_size"
  std::string help;
  std::vector<std::string> choices;  // empty: any value of the option's type
  // What a value looks like, for errors about a value of the wrong shape (a YAML list or map).
  std::string value_type = "a single value";
  // The value a bare flag stands for (`--amp` is `--amp true`, `--loss-scale` is `--loss-scale
  // dynamic`); empty: the flag needs a value.
  std::string flag_value;
  // Parses and stores `text`; throws BadInputError("<why>") without naming the source, which
  // the caller prefixes ("--batch-size", "config.yaml:3 key 'batch-size'").
  std::function<void(TrainConfig&, const std::string& text)> set;
  std::function<std::string(const TrainConfig&)> get;
  PathUse path_use = PathUse::kNone;
  // Written into config.yaml. False for what belongs to one invocation (the output folder,
  // --resume, --overwrite, the process's place in the job) and for the seed-style spellings that
  // are folded into another option, so that an edited config.yaml passed back to --config runs.
  bool saved = true;
  // The section of --help it is listed under ("Data and model", "Training", "Precision", ...).
  std::string section;
};

// All options, in the order of the start-up table and config.yaml.
const std::vector<OptionSpec>& TrainOptions();
// The option with this name or alias (dashes and underscores equivalent), or nullptr.
const OptionSpec* FindTrainOption(const std::string& key);
// The option name closest to a misspelt `key` (dashes and underscores equivalent), or "" when
// none is close enough to be what was meant.
std::string ClosestOptionName(const std::string& key);

// For an unknown option that another tool has (`wandb`, `wandb-project`): what mgpu offers
// instead, as a sentence; "" for any other key.
std::string ForeignOptionHint(const std::string& key);

// Applies a YAML file (a mapping of option names to scalars). Throws BadInputError naming the
// file, line and key for unknown keys, non-scalar keys or values (with the type expected), bad
// values and an option given twice (both lines); naming the file for a folder or unreadable file.
void ApplyYamlFile(TrainConfig& config, const std::string& path);

// Folds the seed scripts' spellings into the options they stand for; call once every source
// (YAML, flags) has been applied. Throws BadInputError naming both flags where they disagree.
//   `--dtype D [--amp]` → `precision` (PrecisionFromDtype in config/precision.h): they choose the
//       policy when --precision is left at fp32 and must otherwise agree with it (`--precision
//       o2 --dtype fp16` is fine, `--precision amp-bf16 --dtype fp16` is not).
//   `--img-size N` → the side the model sees: imagefolder loads images at N (--image-size);
//       other data sets are resized to N (--augment resize, or rrc-flip's output side).
//   `--checkpoint-name NAME` alone → `--checkpoint {out}` (the weights into the output folder).
void ResolveSeedSpellings(TrainConfig& config);

// Settles `precision` for the device the run trains on (PrecisionForDevice in config/precision.h:
// `--amp` on a CPU is amp-bf16) and sets precision_note and precision_warning. Call once the
// device is known, before anything records the policy (config.yaml, the run's name).
void ResolvePrecisionForDevice(TrainConfig& config, bool cuda);

// Where --checkpoint writes the trained weights for a run whose output folder is `output_folder`
// ({out} replaced, NAME defaulted); "" without --checkpoint.
std::string CheckpointPath(const TrainConfig& config, const std::string& output_folder);

// Checks relations between options and the bounds of thread counts, that --out is not (under)
// an existing file, and that it holds no run (summary.json or config.yaml) unless --resume or
// --overwrite says what to do with it (device availability is checked later, at start-up).
void ValidateConfig(const TrainConfig& config);

// The augmentation options of `config` (seeded with config.seed); the data set's, DDP's and the
// schedule's are worker/train_config.h's.
AugmentOptions AugmentOptionsFrom(const TrainConfig& config);
// The lr the optimizer starts from: --lr, times global batch / 256 with --lr-scale-rule linear.
double EffectiveLr(const TrainConfig& config);

// --log-every's bound when it is left to MetricsRowInterval: long runs keep a row every 50 steps.
inline constexpr int64_t kMaxAutoLogEvery = 50;

// The optimizer steps of the whole run, from its first step: --epochs' worth, or --max-steps if fewer.
int64_t TotalSteps(const TrainConfig& config, int64_t steps_per_epoch);
// Optimizer steps between metrics.csv rows: --log-every, or, left at 0, a tenth of TotalSteps
// between 1 and kMaxAutoLogEvery, so that a 20-step smoke run still draws a loss curve of 10 rows.
int64_t MetricsRowInterval(const TrainConfig& config, int64_t steps_per_epoch);
// Whether steps first_step+1 .. total_steps write a metrics row: one comes every `interval` steps
// and at each epoch's end.
bool WritesMetricsRow(int64_t first_step, int64_t total_steps, int64_t interval, int64_t steps_per_epoch);

// The effective configuration as YAML: every saved option (OptionSpec::saved), canonical names.
std::string ConfigToYaml(const TrainConfig& config);

}  // namespace mgpu
