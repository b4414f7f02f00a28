#include "config/train_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <thread>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/files.h"
#include "common/status.h"
#include "config/dataset_names.h"
#include "config/model_names.h"
#include "config/profile_window.h"

namespace mgpu {
namespace {

std::string Canonical(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  return key;
}

// A choice as the seed scripts may spell it: case, dashes and underscores do not matter
// (`VGG19`, `CIFAR10`, `FashionMNIST`, `amp_bf16`).
std::string Folded(const std::string& value) {
  std::string folded;
  for (const unsigned char c : value) {
    if (c != '-' && c != '_') folded.push_back(static_cast<char>(std::tolower(c)));
  }
  return folded;
}

// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`: the optimal string
// alignment distance, so that `modle` is one edit from `model`, as from `mode`.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The candidate whose `key` form is fewest edits from `wanted`'s, if that is close enough to be
// a typo of it (at most 2 edits, and fewer than half of the word); else "".
std::string ClosestName(const std::string& wanted, const std::vector<std::string>& candidates,
                        const std::function<std::string(const std::string&)>& key) {
  const std::string target = key(wanted);
  std::string best;
  size_t best_distance = std::min<size_t>(3, (target.size() + 1) / 2);
  for (const auto& candidate : candidates) {
    const size_t d = EditDistance(target, key(candidate));
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

// `value` as one of `choices`, however it is spelt (Folded); else BadInputError listing them
// and suggesting the closest.
std::string MatchChoice(const std::string& value, const std::vector<std::string>& choices) {
  for (const auto& choice : choices) {
    if (Folded(choice) == Folded(value)) return choice;
  }
  const std::string closest = ClosestName(value, choices, Folded);
  throw BadInputError(fmt::format("'{}' is not one of: {}{}", value, fmt::join(choices, ", "),
                                  closest.empty() ? "" : fmt::format("; did you mean '{}'?", closest)));
}

bool ParseBool(const std::string& text) {
  const std::string folded = Folded(text);
  if (folded == "true" || folded == "1" || folded == "yes" || folded == "on") return true;
  if (folded == "false" || folded == "0" || folded == "no" || folded == "off") return false;
  throw BadInputError(fmt::format("'{}' is not true or false", text));
}

// With min_value -1, "auto" stands for -1 (the value is then taken from the environment).
int64_t ParseInt(const std::string& text, int64_t min_value) {
  if (min_value == -1 && text == "auto") return -1;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0') {
    throw BadInputError(fmt::format("'{}' is not an integer", text));
  }
  if (value < min_value) throw BadInputError(fmt::format("{} is below the minimum {}", value, min_value));
  return value;
}

double ParsePositiveDouble(const std::string& text, bool allow_zero) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !std::isfinite(value)) {
    throw BadInputError(fmt::format("'{}' is not a number", text));
  }
  if (value < 0 || (!allow_zero && value == 0)) {
    throw BadInputError(fmt::format("{} must be {}", text, allow_zero ? ">= 0" : "> 0"));
  }
  return value;
}

std::string FormatDouble(double value) { return fmt::format("{}", value); }

OptionSpec IntOption(std::string name, std::vector<std::string> aliases, int64_t TrainConfig::*field,
                     int64_t min_value, std::string help) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.aliases = std::move(aliases);
  spec.help = std::move(help);
  spec.value_type = "an integer";
  spec.set = [field, min_value](TrainConfig& c, const std::string& t) { c.*field = ParseInt(t, min_value); };
  spec.get = [field, min_value](const TrainConfig& c) {
    return min_value == -1 && c.*field == -1 ? std::string("auto") : std::to_string(c.*field);
  };
  return spec;
}

OptionSpec BoolOption(std::string name, bool TrainConfig::*field, std::string help) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.help = std::move(help);
  spec.choices = {"true", "false"};
  spec.flag_value = "true";
  spec.set = [field](TrainConfig& c, const std::string& t) { c.*field = ParseBool(t); };
  spec.get = [field](const TrainConfig& c) { return std::string(c.*field ? "true" : "false"); };
  return spec;
}

OptionSpec DoubleOption(std::string name, double TrainConfig::*field, bool allow_zero, std::string help) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.help = std::move(help);
  spec.value_type = "a number";
  spec.set = [field, allow_zero](TrainConfig& c, const std::string& t) {
    c.*field = ParsePositiveDouble(t, allow_zero);
  };
  spec.get = [field](const TrainConfig& c) { return FormatDouble(c.*field); };
  return spec;
}

// `text`, or the canonical value it is a (case-folded) alias of.
std::string ResolveValueAlias(const std::string& text,
                              const std::vector<std::pair<std::string, std::string>>& value_aliases) {
  std::string value = text;
  for (const auto& [alias, canonical] : value_aliases) {
    if (Folded(value) == Folded(alias)) value = canonical;
  }
  return value;
}

// A string option; with `choices`, one of them however it is spelt (MatchChoice), or one of
// `value_aliases` (alias → canonical value).
OptionSpec StringOption(std::string name, std::vector<std::string> aliases, std::string TrainConfig::*field,
                        std::vector<std::string> choices, std::string help,
                        std::vector<std::pair<std::string, std::string>> value_aliases = {}) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.aliases = std::move(aliases);
  spec.help = std::move(help);
  spec.choices = choices;
  spec.set = [field, choices, value_aliases](TrainConfig& c, const std::string& t) {
    const std::string value = ResolveValueAlias(t, value_aliases);
    c.*field = choices.empty() ? value : MatchChoice(value, choices);
  };
  spec.get = [field](const TrainConfig& c) { return c.*field; };
  return spec;
}

// An option whose values are `names`, stored as the enum value at the name's index (the enums of
// config/choices.h and config/precision.h list their values in their names' order); matched as
// StringOption matches a choice.
template <typename Enum>
OptionSpec EnumOption(std::string name, std::vector<std::string> aliases, Enum TrainConfig::*field,
                      const std::vector<std::string>& names, std::string help,
                      std::vector<std::pair<std::string, std::string>> value_aliases = {}) {
  OptionSpec spec;
  spec.name = std::move(name);
  spec.aliases = std::move(aliases);
  spec.help = std::move(help);
  spec.choices = names;
  spec.set = [field, names, value_aliases](TrainConfig& c, const std::string& t) {
    const std::string chosen = MatchChoice(ResolveValueAlias(t, value_aliases), names);
    c.*field = static_cast<Enum>(std::find(names.begin(), names.end(), chosen) - names.begin());
  };
  spec.get = [field, names](const TrainConfig& c) { return names[static_cast<size_t>(c.*field)]; };
  return spec;
}

// --help's sections, in the table's order: each starts at the named option and runs to the next.
void AssignHelpSections(std::vector<OptionSpec>& options) {
  static const std::vector<std::pair<std::string, std::string>> kSectionStarts = {
      {"model", "Data and model"},
      {"augment", "Augmentation"},
      {"epochs", "Training"},
      {"mode", "Execution"},
      {"precision", "Precision"},
      {"memory-snapshot", "Performance and profiling"},
      {"checkpoint-every", "Checkpoints"},
      {"rank", "Distributed identity (set by mgpu run, torchrun or mpirun)"},
      {"backend", "DDP (--mode ddp)"},
      {"dp-devices", "DataParallel (--mode dp)"},
      {"out", "Output"},
  };
  std::string section = kSectionStarts.front().second;
  for (OptionSpec& spec : options) {
    for (const auto& [start, name] : kSectionStarts) {
      if (spec.name == start) section = name;
    }
    spec.section = section;
  }
}

// The options of --help's "Data and model" section, in their order there.
void AddDataAndModelOptions(std::vector<OptionSpec>& o) {
  o.push_back(StringOption("model", {}, &TrainConfig::model, ModelNames(),
                           "model architecture (VGG with batch norm), or the user's own: torchscript:PATH (saved "
                           "by torch.jit.script/trace) or plugin:LIB.so:NAME (models/model_plugin.h)"));
  {
    // A user's model is kept verbatim (its path is case-sensitive); built-ins match as any choice.
    auto match_builtin = o.back().set;
    o.back().set = [match_builtin](TrainConfig& c, const std::string& t) {
      if (IsUserModel(t)) {
        c.model = t;
      } else {
        match_builtin(c, t);
      }
    };
    o.back().path_use = PathUse::kLoadsModel;
  }
  o.push_back(StringOption("dataset", {}, &TrainConfig::dataset, DatasetNames(),
                           "data set (synthetic: random images, for measuring compute alone)"));
  o.push_back(StringOption("data-dir", {"data_dir", "dataset_root"}, &TrainConfig::data_dir, {},
                           "folder with the data set's files (default: the data set's standard folder)"));
  o.back().path_use = PathUse::kReads;
  o.push_back(IntOption("num-workers", {"num_workers"}, &TrainConfig::num_workers, 0,
                        "loader threads (0: batches are built on the training thread)"));
  o.push_back(IntOption("image-size", {"image_size"}, &TrainConfig::image_size, 1,
                        "imagefolder: side in pixels images are resized to when loaded; synthetic: "
                        "the images' side"));
  o.push_back(IntOption("img-size", {"img_size"}, &TrainConfig::img_size, 0,
                        "seed-style: the side of the images the model sees (imagefolder: loaded at this "
                        "size; other data sets: resized to it, e.g. 227 for AlexNet on CIFAR-10; 0: not given)"));
  o.back().saved = false;
  o.push_back(StringOption("on-bad-image", {"on_bad_image"}, &TrainConfig::on_bad_image,
                           {"fail", "skip"},
                           "imagefolder, webdataset: an image that cannot be decoded stops the run (fail) or "
                           "is left out and logged (skip; streaming: replaced by the next readable sample)"));
  o.push_back(StringOption("data-loading", {"data_loading"}, &TrainConfig::data_loading, {"auto", "memory", "stream"},
                           "imagefolder, webdataset: hold the images decoded in memory (memory), or decode them in "
                           "the loader threads every epoch (stream; the ImageNet scale); auto streams when the "
                           "decoded images would exceed 25% of physical memory"));
  o.push_back(StringOption("decode", {}, &TrainConfig::decode, {"cpu", "gpu", "auto"},
                           "imagefolder, webdataset with --data-loading stream: decode JPEGs in the loader threads "
                           "(cpu), or with nvJPEG on the training GPU, the threads reading files and drawing crops "
                           "(gpu); auto: gpu where a CUDA device, nvJPEG and JPEG data are there, else cpu"));
  o.push_back(BoolOption("cpu-assist", &TrainConfig::cpu_assist,
                         "--decode gpu: the loader threads also decode samples of the next batch by the CPU path "
                         "while the device decodes (faster where the GPU's JPEG engines limit; a sample's pixels "
                         "then depend, within the decoders' tolerance, on which one ran); false: nvJPEG decodes "
                         "every sample it takes, the same pixels every run"));
  o.push_back(IntOption("synthetic-train", {}, &TrainConfig::synthetic_train, 1,
                        "synthetic: number of training images"));
  o.push_back(IntOption("synthetic-test", {}, &TrainConfig::synthetic_test, 1,
                        "synthetic: number of test images"));
  o.push_back(IntOption("synthetic-channels", {}, &TrainConfig::synthetic_channels, 1,
                        "synthetic: channels per image, 1 (grayscale, the shape of MNIST's images and of "
                        "LeNet's first layer there) or 3 (RGB)"));
  o.back().choices = {"1", "3"};
  o.back().set = [parse = o.back().set](TrainConfig& c, const std::string& t) {
    parse(c, t);
    if (c.synthetic_channels != 1 && c.synthetic_channels != 3) {
      throw BadInputError(fmt::format("{} channels: synthetic images have 1 (grayscale) or 3 (RGB)", t));
    }
  };
}

// The options of --help's "Augmentation" section, in their order there.
void AddAugmentationOptions(std::vector<OptionSpec>& o) {
  o.push_back(StringOption("augment", {}, &TrainConfig::augment, AugmentNames(),
                           "per-sample training augmentation (affine: RandomAffine; crop-flip: pad, "
                           "random crop, flip; resize: to --resize; rrc-flip: RandomResizedCrop to "
                           "--resize, flip)"));
  o.push_back(DoubleOption("affine-degrees", &TrainConfig::affine_degrees, true,
                           "affine: rotation drawn from [-degrees, degrees]"));
  o.push_back(DoubleOption("affine-translate", &TrainConfig::affine_translate, true,
                           "affine: shift drawn up to this fraction of the width and height"));
  {
    OptionSpec scale;
    scale.name = "affine-scale";
    scale.help = "affine: scale factor drawn from lo,hi";
    scale.value_type = "a range lo,hi";
    scale.set = [](TrainConfig& c, const std::string& t) {
      const size_t comma = t.find(',');
      if (comma == std::string::npos) {
        throw BadInputError(fmt::format("'{}' is not a range lo,hi (e.g. 0.9,1.1)", t));
      }
      const double lo = ParsePositiveDouble(t.substr(0, comma), false);
      const double hi = ParsePositiveDouble(t.substr(comma + 1), false);
      if (lo > hi) throw BadInputError(fmt::format("'{}': lo must not exceed hi", t));
      c.affine_scale_min = lo;
      c.affine_scale_max = hi;
    };
    scale.get = [](const TrainConfig& c) {
      return FormatDouble(c.affine_scale_min) + "," + FormatDouble(c.affine_scale_max);
    };
    o.push_back(scale);
  }
  o.push_back(StringOption("affine-interpolation", {}, &TrainConfig::affine_interpolation,
                           InterpolationNames(), "affine: pixel interpolation (torchvision's default: nearest)"));
  o.push_back(IntOption("crop-padding", {}, &TrainConfig::crop_padding, 0,
                        "crop-flip: zero padding on each side before the random crop"));
  o.push_back(IntOption("resize", {}, &TrainConfig::resize, 0,
                        "resize and rrc-flip: output side in pixels (e.g. 227 for AlexNet on CIFAR-10; "
                        "rrc-flip: 0 keeps the input size); evaluation resizes to it too"));
}

// The options of --help's "Training" section, in their order there.
void AddTrainingOptions(std::vector<OptionSpec>& o) {
  o.push_back(IntOption("epochs", {}, &TrainConfig::epochs, 1, "passes over the training set"));
  o.push_back(IntOption("max-steps", {"max_steps"}, &TrainConfig::max_steps, 0,
                        "stop after this many optimizer steps (0: no limit)"));
  o.push_back(IntOption("batch-size", {"batch_size"}, &TrainConfig::batch_size, 1,
                        "global batch size (split across ranks in DDP)"));
  o.push_back(DoubleOption("lr", &TrainConfig::lr, false, "learning rate"));
  o.push_back(StringOption("optimizer", {}, &TrainConfig::optimizer, {"sgd", "adam", "adamw"},
                           "optimizer (fused multi-tensor kernels)"));
  o.push_back(DoubleOption("momentum", &TrainConfig::momentum, true, "SGD momentum"));
  o.push_back(BoolOption("nesterov", &TrainConfig::nesterov, "Nesterov momentum (SGD)"));
  o.push_back(DoubleOption("weight-decay", &TrainConfig::weight_decay, true, "L2 weight decay"));
  o.back().aliases = {"weight_decay"};
  o.push_back(StringOption("scheduler", {}, &TrainConfig::scheduler, SchedulerNames(),
                           "learning-rate schedule (multistep: per epoch; cosine: per step after a linear "
                           "warm-up; plateau: ReduceLROnPlateau on the test loss)"));
  {
    OptionSpec milestones;
    milestones.name = "milestones";
    milestones.help = "multistep: epochs at which the lr is multiplied by --gamma, e.g. 30,60";
    milestones.value_type = "epochs separated by commas in one value (e.g. 30,60)";
    milestones.set = [](TrainConfig& c, const std::string& t) {
      std::vector<int64_t> epochs;  // "" (as config.yaml writes none) means none
      for (size_t begin = 0; !t.empty() && begin <= t.size();) {
        const size_t comma = std::min(t.find(',', begin), t.size());
        epochs.push_back(ParseInt(t.substr(begin, comma - begin), 1));
        begin = comma + 1;
      }
      if (!std::is_sorted(epochs.begin(), epochs.end())) {
        throw BadInputError(fmt::format("'{}': the epochs must be in increasing order", t));
      }
      c.milestones = epochs;
    };
    milestones.get = [](const TrainConfig& c) { return fmt::format("{}", fmt::join(c.milestones, ",")); };
    o.push_back(milestones);
  }
  o.push_back(DoubleOption("gamma", &TrainConfig::gamma, false, "multistep: lr factor at each milestone"));
  o.push_back(DoubleOption("warmup-epochs", &TrainConfig::warmup_epochs, true,
                           "cosine: epochs of linear warm-up (per step; fractions allowed)"));
  o.back().aliases = {"warmup_epochs"};
  o.push_back(DoubleOption("min-lr", &TrainConfig::min_lr, true, "cosine: the final lr; plateau: the lowest lr"));
  o.back().aliases = {"min_lr"};
  o.push_back(DoubleOption("plateau-factor", &TrainConfig::plateau_factor, false,
                           "plateau: lr factor after --plateau-patience epochs without a better test loss"));
  o.push_back(IntOption("plateau-patience", {}, &TrainConfig::plateau_patience, 0,
                        "plateau: epochs without a better test loss (by 1e-4 relative) before lowering the lr"));
  o.push_back(StringOption("lr-scale-rule", {"lr_scale_rule"}, &TrainConfig::lr_scale_rule, {"none", "linear"},
                           "linear: the lr is --lr x global batch / 256 (Goyal et al.)"));
  o.push_back(DoubleOption("label-smoothing", &TrainConfig::label_smoothing, true,
                           "cross-entropy label smoothing of the training loss, in [0, 1)"));
  o.back().aliases = {"label_smoothing"};
  {
    OptionSpec seed;
    seed.name = "seed";
    seed.help = "random seed (model initialization and shuffling)";
    seed.value_type = "an integer";
    seed.set = [](TrainConfig& c, const std::string& t) { c.seed = static_cast<uint64_t>(ParseInt(t, 0)); };
    seed.get = [](const TrainConfig& c) { return std::to_string(c.seed); };
    o.push_back(seed);
  }
}

// The options of --help's "Execution" section, in their order there.
void AddExecutionOptions(std::vector<OptionSpec>& o) {
  o.push_back(EnumOption("mode", {}, &TrainConfig::mode, ModeNames(),
                           "single: one process, one device; dp: one process, the batch split over "
                           "--dp-devices; ddp: one process per device, gradients all-reduced",
                           {{"base", "single"}, {"baseline", "single"}, {"DP", "dp"}, {"DDP", "ddp"}}));
  o.push_back(StringOption("device", {}, &TrainConfig::device, {},
                           "auto | cpu | cuda | cuda:K"));
}

// The options of --help's "Precision" section, in their order there.
void AddPrecisionOptions(std::vector<OptionSpec>& o) {
  o.push_back(EnumOption("precision", {}, &TrainConfig::precision, PrecisionNames(),
                           "arithmetic precision policy (amp-*: autocast; fp16/o2: float16 model, "
                           "BatchNorm in float32; o2 adds float32 master weights)"));
  {
    OptionSpec loss_scale;
    loss_scale.name = "loss-scale";
    loss_scale.aliases = {"loss_scale"};
    loss_scale.help = "loss scaling: none | dynamic (GradScaler, from 2^16) | a static scale such as "
                      "1024; float16 policies without it may underflow";
    loss_scale.flag_value = "dynamic";  // the seeds' `--loss-scale` switch
    loss_scale.set = [](TrainConfig& c, const std::string& t) { c.loss_scale = ParseLossScaling(t); };
    loss_scale.get = [](const TrainConfig& c) { return LossScalingText(c.loss_scale); };
    o.push_back(loss_scale);
  }
  {
    // Seed-style spellings of --precision; they show the resolved policy's dtype and autocast.
    OptionSpec dtype;
    dtype.name = "dtype";
    dtype.help = "seed-style precision: fp32 | fp16 (with --amp: amp-fp16) | bf16 (needs --amp)";
    dtype.choices = {"fp32", "fp16", "bf16"};
    dtype.set = [](TrainConfig& c, const std::string& t) {
      if (t != "fp32" && t != "fp16" && t != "bf16") {
        throw BadInputError(fmt::format("'{}' is not one of: fp32, fp16, bf16", t));
      }
      c.dtype = t;
    };
    dtype.get = [](const TrainConfig& c) {
      const Precision p = c.precision;
      if (p == Precision::kAmpBf16) return std::string("bf16");
      return std::string(p == Precision::kFp32 || p == Precision::kTf32 ? "fp32" : "fp16");
    };
    dtype.saved = false;
    o.push_back(dtype);
    OptionSpec amp = BoolOption("amp", &TrainConfig::amp, "seed-style: autocast on (with --dtype)");
    amp.get = [](const TrainConfig& c) {
      return std::string(AutocastFormat(c.precision) ? "true" : "false");
    };
    amp.saved = false;
    o.push_back(amp);
  }
  o.push_back(EnumOption("on-nonfinite", {"on_nonfinite"}, &TrainConfig::on_nonfinite, OnNonfiniteNames(),
                           "a non-finite loss: stop (exit 3, naming the step) or skip the step and count it"));
  o.push_back(DoubleOption("grad-clip", &TrainConfig::grad_clip, true,
                           "clip the gradients' global L2 norm to this (0: off)"));
  o.back().aliases = {"grad_clip"};
}

// The options of --help's "Performance and profiling" section, in their order there.
void AddPerformanceOptions(std::vector<OptionSpec>& o) {
  o.push_back(StringOption("memory-snapshot", {"memory_snapshot"}, &TrainConfig::memory_snapshot, {},
                           "CUDA only: record allocator history and write a snapshot pickle here "
                           "(for pytorch.org/memory_viz)"));
  o.back().path_use = PathUse::kWrites;
  {
    OptionSpec profile;
    profile.name = "profile-steps";
    profile.aliases = {"profile_steps"};
    profile.help = "write a Chrome trace (host operators, CUDA kernels and copies) of optimizer steps "
                   "FIRST-LAST to <out>/trace-rank<R>.json, e.g. 20-22";
    profile.set = [](TrainConfig& c, const std::string& t) { c.profile_steps = FormatProfileWindow(ParseProfileWindow(t)); };
    profile.get = [](const TrainConfig& c) { return c.profile_steps; };
    o.push_back(profile);
  }
  o.push_back(BoolOption("cuda-graphs", &TrainConfig::cuda_graphs,
                         "capture the training step as CUDA graphs after 3 eager steps and replay them: with "
                         "--mode single or ddp the whole step, DDP's NCCL all-reduces included (no "
                         "--grad-accum/--grad-clip, not o2), with --mode dp each replica's forward + backward "
                         "(--dp-impl mgpu, CUDA devices)"));
  o.back().aliases = {"cuda_graphs"};
  {
    OptionSpec channels_last;
    channels_last.name = "channels-last";
    channels_last.aliases = {"channels_last"};
    channels_last.help = "keep convolution weights and batches in NHWC (channels-last) memory format; auto: on "
                         "for convolutional nets on CUDA under a 16-bit precision, off otherwise";
    channels_last.choices = {"auto", "true", "false"};
    channels_last.flag_value = "true";
    channels_last.set = [](TrainConfig& c, const std::string& t) {
      if (Folded(t) == "auto") {
        c.channels_last = std::nullopt;
        return;
      }
      try {
        c.channels_last = ParseBool(t);
      } catch (const BadInputError&) {
        throw BadInputError(fmt::format("'{}' is not auto, true or false", t));
      }
    };
    channels_last.get = [](const TrainConfig& c) {
      return std::string(!c.channels_last ? "auto" : *c.channels_last ? "true" : "false");
    };
    o.push_back(channels_last);
  }
  o.push_back(BoolOption("data-on-device", &TrainConfig::data_on_device,
                         "keep the training set on the training device and build batches there "
                         "(no augmentation; not with --mode dp)"));
  o.back().aliases = {"data_on_device"};
  o.push_back(BoolOption("cudnn-benchmark", &TrainConfig::cudnn_benchmark,
                         "CUDA: time cuDNN's convolution algorithms on the first batch of each shape and keep "
                         "the fastest (false: cuDNN's heuristics pick them, the same in every run and rank)"));
  o.back().aliases = {"cudnn_benchmark"};
  o.push_back(BoolOption("fused-kernels", &TrainConfig::fused_kernels,
                         "CUDA: mgpu's own fused kernels where a model has them (LeNet's convolution + ReLU + "
                         "max-pool stages and fully connected head in float32; ResNet's and VGG's batch norm + add "
                         "+ ReLU and the conv nets' max-pools on channels-last bf16 or float32 activations); false: "
                         "ATen's and cuDNN's kernels, one per operation"));
  o.back().aliases = {"fused_kernels"};
  o.push_back(IntOption("threads", {}, &TrainConfig::threads, 0,
                        "intra-op CPU threads (0: LibTorch's default)"));
  o.push_back(EnumOption("numa-binding", {"numa_binding"}, &TrainConfig::numa_binding, NumaBindingNames(),
                         "CUDA: run this rank's threads on the CPUs near its GPU, as torchrun's --numa-binding: "
                         "node (the GPU's NUMA node), socket (its sockets), exclusive (a share of the node's cores "
                         "per rank there), core-complex (one L3 cache domain of the node); none: every CPU the "
                         "process may use"));
  o.push_back(IntOption("eval-batch-size", {"eval_batch_size"}, &TrainConfig::eval_batch_size, 1,
                        "batch size for evaluation"));
  o.push_back(IntOption("eval-max-samples", {"eval_max_samples"}, &TrainConfig::eval_max_samples, 0,
                        "evaluate on at most this many test images, spread evenly over the test set, for quick "
                        "smoke runs (0: all)"));
}

// The options of --help's "Checkpoints" section, in their order there.
void AddCheckpointOptions(std::vector<OptionSpec>& o) {
  o.push_back(IntOption("checkpoint-every", {"checkpoint_every"}, &TrainConfig::checkpoint_every, 0,
                        "write <out>/checkpoints/step-N.ckpt every N optimizer steps and at every epoch's "
                        "end (0: off)"));
  o.push_back(StringOption("resume", {}, &TrainConfig::resume, {},
                           "continue from a checkpoint file, or a run folder's checkpoints/latest.ckpt"));
  o.back().path_use = PathUse::kReads;
  o.back().saved = false;
  o.push_back(BoolOption("overwrite", &TrainConfig::overwrite,
                         "a fresh run may replace the run already in --out (its summary, metrics, logs and "
                         "checkpoints); without it, such an --out is refused"));
  o.back().saved = false;
}

// The options of --help's "Distributed identity" section, in their order there.
void AddIdentityOptions(std::vector<OptionSpec>& o) {
  o.push_back(IntOption("rank", {}, &TrainConfig::rank, -1, "this process's rank (auto: RANK or OMPI_COMM_WORLD_RANK)"));
  o.back().saved = false;
  o.push_back(IntOption("world-size", {"world_size"}, &TrainConfig::world_size, -1,
                        "number of processes (auto: WORLD_SIZE or OMPI_COMM_WORLD_SIZE)"));
  o.back().saved = false;
  o.push_back(IntOption("local-rank", {"local_rank"}, &TrainConfig::local_rank, -1,
                        "rank on this host (auto: LOCAL_RANK or OMPI_COMM_WORLD_LOCAL_RANK)"));
  o.back().saved = false;
  o.push_back(StringOption("master-addr", {"master_addr"}, &TrainConfig::master_addr, {},
                           "rendezvous host (default MASTER_ADDR or 127.0.0.1)"));
  o.back().saved = false;
  o.push_back(IntOption("master-port", {"master_port"}, &TrainConfig::master_port, -1,
                        "rendezvous port (default MASTER_PORT or 29500)"));
  o.back().saved = false;
}

// The options of --help's "DDP (--mode ddp)" section, in their order there.
void AddDdpOptions(std::vector<OptionSpec>& o) {
  o.push_back(StringOption("backend", {}, &TrainConfig::backend, {"auto", "nccl", "gloo", "mpi"},
                           "DDP communication (auto: nccl on GPUs, gloo on CPUs)"));
  o.push_back(DoubleOption("bucket-cap-mb", &TrainConfig::bucket_cap_mb, false,
                           "DDP gradient bucket size in MiB (the first bucket is 1 MiB)"));
  o.back().aliases = {"bucket_cap_mb"};
  o.push_back(DoubleOption("last-bucket-cap-mb", &TrainConfig::last_bucket_cap_mb, true,
                           "DDP: the last-ready gradients up to this many MiB form the last bucket, whose "
                           "all-reduce cannot overlap backward (0: PyTorch's plan, no separate last bucket)"));
  o.push_back(BoolOption("gradient-as-bucket-view", &TrainConfig::gradient_as_bucket_view,
                         "DDP: gradients live in the all-reduce buckets, nothing is copied back after the all-reduce "
                         "(false: PyTorch's default, a copy per parameter)"));
  o.push_back(BoolOption("find-unused-parameters", &TrainConfig::find_unused_parameters,
                         "DDP: reduce parameters without a gradient as zeros instead of failing"));
  o.push_back(BoolOption("broadcast-buffers", &TrainConfig::broadcast_buffers,
                         "DDP: copy rank 0's buffers (batch-norm statistics) to all ranks before each forward"));
  o.push_back(EnumOption("ddp-compression", {"ddp_compression"}, &TrainConfig::ddp_compression,
                         DdpCompressionNames(), "DDP: all-reduce gradients in half precision"));
  o.push_back(IntOption("grad-accum", {"grad_accum"}, &TrainConfig::grad_accum, 1,
                        "micro-batches accumulated per optimizer step (DDP syncs only the last)"));
  o.push_back(IntOption("nccl-max-ctas", {}, &TrainConfig::nccl_max_ctas, 0,
                        "thread blocks (SMs) one NCCL collective may use while it overlaps backward "
                        "(0: NCCL's choice; NCCL_MAX_CTAS in the environment wins)"));
  o.push_back(DoubleOption("collective-timeout", &TrainConfig::collective_timeout, false,
                           "seconds before a stuck collective fails the job"));
}

// The options of --help's "DataParallel (--mode dp)" section, in their order there.
void AddDataParallelOptions(std::vector<OptionSpec>& o) {
  o.push_back(StringOption("dp-devices", {"dp_devices"}, &TrainConfig::dp_devices, {},
                           "--mode dp: devices, the primary first: auto (every visible GPU; with "
                           "--device cpu or no GPU: cpu,cpu), a list such as cuda:0,cuda:1, or cpu,cpu"));
  o.push_back(StringOption("dp-impl", {"dp_impl"}, &TrainConfig::dp_impl, {"mgpu", "libtorch"},
                           "--mode dp: mgpu (replicas kept, one thread per device, NCCL reduce) or "
                           "libtorch (LibTorch's data_parallel every step, for comparison; GPUs only)"));
}

// The options of --help's "Output" section, in their order there.
void AddOutputOptions(std::vector<OptionSpec>& o) {
  o.push_back(StringOption("out", {}, &TrainConfig::out, {},
                           "output folder (default runs/<timestamp>-<model>-<dataset>-<mode>)"));
  o.back().path_use = PathUse::kWrites;
  o.back().saved = false;
  o.push_back(StringOption("name", {}, &TrainConfig::name, {}, "short label of the run for reports"));
  o.push_back(IntOption("log-every", {"log_every"}, &TrainConfig::log_every, 0,
                        "optimizer steps between metrics.csv rows (0: a tenth of the run's steps, at most 50)"));
  o.push_back(StringOption("progress", {}, &TrainConfig::progress, {"auto", "bar", "lines"},
                           "progress display (auto: a bar on a terminal, plain lines otherwise)"));
  {
    // The seeds' switch (tqdm): a bar, drawn only where one can be (--progress auto), or none.
    OptionSpec bar;
    bar.name = "progress-bar";
    bar.aliases = {"progress_bar"};
    bar.help = "seed-style switch: true draws the bar on a terminal (plain lines elsewhere, as --progress auto), "
               "false prints plain lines only";
    bar.choices = {"true", "false"};
    bar.flag_value = "true";
    bar.set = [](TrainConfig& c, const std::string& t) {
      if (!ParseBool(t)) {
        c.progress = "lines";
      } else if (c.progress == "lines") {
        c.progress = "auto";
      }
    };
    bar.get = [](const TrainConfig& c) { return std::string(c.progress == "lines" ? "false" : "true"); };
    bar.saved = false;
    o.push_back(bar);
  }
  o.push_back(BoolOption("tensorboard", &TrainConfig::tensorboard,
                         "write the TensorBoard event file (events.out.tfevents.*) into the output folder"));
  o.push_back(StringOption("tensorboard-log", {"tensorboard_log"}, &TrainConfig::tensorboard_log, {},
                           "also write the TensorBoard events to <this folder>/<output folder's name>/, so "
                           "`tensorboard --logdir <this folder>` shows every run there side by side"));
  o.back().path_use = PathUse::kWrites;
  o.push_back(BoolOption("save-state-dict", &TrainConfig::save_state_dict,
                         "write model_state_dict.pt at the end: the weights by torchvision's names, for Python's "
                         "torch.load and load_state_dict (worker/state_dict_export.h)"));
  o.back().aliases = {"save_state_dict"};
  o.push_back(BoolOption("save-module", &TrainConfig::save_module,
                         "also write model.pt at the end: LibTorch's archive of the module, for C++ code that builds "
                         "the same mgpu model and calls torch::load (a second copy of the weights)"));
  o.push_back(StringOption("checkpoint", {}, &TrainConfig::checkpoint, {},
                           "seed-style: also write the trained weights (model_state_dict.pt's contents, for "
                           "torch.load) to <this folder>/<--checkpoint-name>; {out} stands for the output folder, "
                           "and a bare --checkpoint is {out}"));
  o.back().path_use = PathUse::kWrites;
  o.back().flag_value = kOutputFolderPlaceholder;
  {
    OptionSpec name = StringOption("checkpoint-name", {"checkpoint_name"}, &TrainConfig::checkpoint_name, {},
                                   "seed-style: the file name --checkpoint writes (default <model>.pth); given "
                                   "alone, the file goes into the output folder");
    name.set = [](TrainConfig& c, const std::string& t) {
      if (t == "." || t == ".." || t.find('/') != std::string::npos) {  // "": the default name
        throw BadInputError(fmt::format("'{}' is not a file name; give a name such as alexnet_cifar10.pth, and the "
                                        "folder with --checkpoint DIR", t));
      }
      c.checkpoint_name = t;
    };
    o.push_back(name);
  }
}

std::vector<OptionSpec> BuildOptions() {
  std::vector<OptionSpec> o;
  AddDataAndModelOptions(o);
  AddAugmentationOptions(o);
  AddTrainingOptions(o);
  AddExecutionOptions(o);
  AddPrecisionOptions(o);
  AddPerformanceOptions(o);
  AddCheckpointOptions(o);
  AddIdentityOptions(o);
  AddDdpOptions(o);
  AddDataParallelOptions(o);
  AddOutputOptions(o);
  AssignHelpSections(o);
  return o;
}

}  // namespace

const std::vector<OptionSpec>& TrainOptions() {
  static const std::vector<OptionSpec> options = BuildOptions();
  return options;
}

std::string ClosestOptionName(const std::string& key) {
  std::vector<std::string> names;
  for (const auto& spec : TrainOptions()) names.push_back(spec.name);
  return ClosestName(key, names, Canonical);
}

std::string ForeignOptionHint(const std::string& key) {
  if (Canonical(key).rfind("wandb", 0) == 0) {
    return "mgpu has no Weights & Biases logging; it writes TensorBoard events (events.out.tfevents.* in the output "
           "folder; --tensorboard-log DIR gathers runs for `tensorboard --logdir DIR`)";
  }
  return "";
}

const OptionSpec* FindTrainOption(const std::string& key) {
  const std::string wanted = Canonical(key);
  for (const auto& spec : TrainOptions()) {
    if (spec.name == wanted) return &spec;
    for (const auto& alias : spec.aliases) {
      if (Canonical(alias) == wanted) return &spec;
    }
  }
  return nullptr;
}

namespace {

// What `spec` accepts, for an error about a value of the wrong shape: "a single value (an integer)".
std::string ExpectedValue(const OptionSpec& spec) {
  const std::string single = OptionSpec{}.value_type;
  if (!spec.choices.empty()) return fmt::format("{} (one of: {})", single, fmt::join(spec.choices, ", "));
  return spec.value_type == single ? single : fmt::format("{} ({})", single, spec.value_type);
}

YAML::Node LoadYamlFile(const std::string& path) {
  // A folder opens as a stream on Linux and fails only when read, as "basic_filebuf::underflow".
  if (IsDirectory(path)) {
    throw BadInputError(fmt::format("config file {} is a folder; give the YAML file in it, e.g. {}/config.yaml",
                                    path, path));
  }
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw BadInputError(fmt::format("config file {} cannot be read; check the path", path));
  } catch (const YAML::Exception& e) {
    throw BadInputError(fmt::format("config file {}:{}:{}: not valid YAML: {}", path,
                                    e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const std::exception& e) {
    throw BadInputError(fmt::format("config file {} cannot be read: {}", path, e.what()));
  }
}

}  // namespace

void ApplyYamlFile(TrainConfig& config, const std::string& path) {
  const YAML::Node root = LoadYamlFile(path);
  if (root.IsNull()) return;
  if (!root.IsMap()) {
    throw BadInputError(fmt::format("config file {}: expected a mapping of option names to values "
                                    "(e.g. `batch-size: 64`)", path));
  }
  // yaml-cpp keeps every entry of a repeated key; the option each entry set first, with its line.
  std::map<const OptionSpec*, std::pair<std::string, int>> first_set;
  for (const auto& entry : root) {
    const int line = entry.first.Mark().line + 1;
    if (!entry.first.IsScalar()) {
      throw BadInputError(fmt::format("config file {}:{}: a key must be an option name, not a list or mapping "
                                      "(e.g. `batch-size: 64`)", path, line));
    }
    const std::string key = entry.first.Scalar();
    const OptionSpec* spec = FindTrainOption(key);
    if (spec == nullptr) {
      const std::string suggestion = ClosestOptionName(key);
      const std::string hint = ForeignOptionHint(key);
      throw BadInputError(fmt::format(
          "config file {}:{}: unknown key '{}'{}; {}", path, line, key,
          suggestion.empty() ? "" : "; did you mean '" + suggestion + "'?",
          hint.empty() ? "run `mgpu-worker --help` for the list of options" : hint + "; remove the key"));
    }
    if (const auto [first, inserted] = first_set.emplace(spec, std::make_pair(key, line)); !inserted) {
      throw BadInputError(fmt::format("config file {}:{}: key '{}' sets option '{}' again, already set by '{}' on "
                                      "line {}; keep one of them",
                                      path, line, key, spec->name, first->second.first, first->second.second));
    }
    if (!entry.second.IsScalar()) {
      const char* given = entry.second.IsSequence() ? "a list" : entry.second.IsMap() ? "a mapping" : "no value";
      throw BadInputError(fmt::format("config file {}:{}: key '{}' needs {}, not {}", path, line, key,
                                      ExpectedValue(*spec), given));
    }
    try {
      spec->set(config, entry.second.Scalar());
    } catch (const BadInputError& e) {
      throw BadInputError(fmt::format("config file {}:{}: key '{}': {}", path, line, key, e.what()));
    }
  }
}

namespace {

void ResolvePrecisionSpelling(TrainConfig& config) {
  if (config.dtype.empty() && !config.amp) return;
  const Precision wanted = PrecisionFromDtype(config.dtype, config.amp);
  const Precision given = config.precision;
  const bool same_dtype = ModelFormat(given) == ModelFormat(wanted) && AutocastFormat(given) == AutocastFormat(wanted);
  const std::string spelled = config.dtype.empty() ? std::string("--amp")
                                                   : fmt::format("--dtype {}{}", config.dtype, config.amp ? " --amp" : "");
  if (given == Precision::kFp32) {
    config.precision = wanted;
    config.precision_spelling = spelled;
  } else if (!same_dtype) {
    throw BadInputError(fmt::format("--precision {} conflicts with {} (which means --precision {}); "
                                    "give one of them", config.precision, spelled, PrecisionName(wanted)));
  }
  config.dtype.clear();
  config.amp = false;
}

// Kept after folding: folding again (config.yaml read back) finds the options in agreement.
void ResolveImageSizeSpelling(TrainConfig& config) {
  const int64_t side = config.img_size;
  if (side == 0) return;
  if (config.dataset == "imagefolder" && config.augment == "none") {
    config.image_size = side;
    return;
  }
  if (config.augment == "none") config.augment = "resize";
  if (config.augment != "resize" && config.augment != "rrc-flip") {
    throw BadInputError(fmt::format("--img-size {} resizes the images, which --augment {} cannot do (it keeps their "
                                    "size); use --augment rrc-flip (random resized crops of side {}) or drop "
                                    "--img-size", side, config.augment, side));
  }
  if (config.resize != 0 && config.resize != side) {
    throw BadInputError(fmt::format("--img-size {} conflicts with --resize {}; give one of them", side, config.resize));
  }
  config.resize = side;
}

}  // namespace

void ResolveSeedSpellings(TrainConfig& config) {
  ResolvePrecisionSpelling(config);
  ResolveImageSizeSpelling(config);
  if (!config.checkpoint_name.empty() && config.checkpoint.empty()) config.checkpoint = kOutputFolderPlaceholder;
}

void ResolvePrecisionForDevice(TrainConfig& config, bool cuda) {
  const DevicePrecision resolved = PrecisionForDevice(config.precision, config.precision_spelling, cuda);
  config.precision = resolved.precision;
  config.precision_note = resolved.note;
  config.precision_warning = resolved.warning;
}

std::string WithOutputFolder(std::string path, const std::string& output_folder) {
  const std::string placeholder = kOutputFolderPlaceholder;
  for (size_t at = path.find(placeholder); at != std::string::npos; at = path.find(placeholder, at)) {
    path.replace(at, placeholder.size(), output_folder);
    at += output_folder.size();
  }
  return path;
}

std::string CheckpointPath(const TrainConfig& config, const std::string& output_folder) {
  if (config.checkpoint.empty()) return "";
  const std::string name = config.checkpoint_name.empty() ? ModelLabel(config.model) + ".pth" : config.checkpoint_name;
  return WithOutputFolder(config.checkpoint, output_folder) + "/" + name;
}

namespace {

// --cuda-graphs and --data-on-device against what they support (--channels-last works in every mode).
void ValidateSpeedOptions(const TrainConfig& config) {
  if (config.cuda_graphs) {
    std::string conflict;
    if (config.mode == Mode::kDdp && (config.backend == "gloo" || config.backend == "mpi")) {
      conflict = fmt::format("--backend {} (only NCCL's collectives run inside a CUDA graph)", config.backend);
    }
    if (config.mode == Mode::kDp && config.dp_impl != "mgpu") {
      conflict = fmt::format("--dp-impl {} (it rebuilds its replicas at every step)", config.dp_impl);
    }
    if (config.device == "cpu") conflict = "--device cpu (graphs are a CUDA feature)";
    // With --mode dp only each replica's forward + backward is a graph; the rest of the step is
    // eager. Otherwise the graph is the whole step (with DDP's all-reduces).
    if (config.mode != Mode::kDp) {
      if (config.grad_accum > 1) conflict = fmt::format("--grad-accum {} (the graph is one micro-batch)", config.grad_accum);
      if (config.grad_clip > 0) conflict = "--grad-clip (clipping reads the gradient norm on the host)";
      if (config.precision == Precision::kO2) conflict = "--precision o2 (master weights are copied outside the kernels)";
    }
    if (!conflict.empty()) {
      throw BadInputError(fmt::format("--cuda-graphs cannot be combined with {}; drop one of them", conflict));
    }
  }
  if (config.decode == "gpu" && (config.data_loading == "memory" ||
                                 (config.dataset != "imagefolder" && config.dataset != "webdataset"))) {
    throw BadInputError(fmt::format("--decode gpu decodes streamed JPEGs (--dataset imagefolder or webdataset with "
                                    "--data-loading stream or auto), not --dataset {} with --data-loading {}; "
                                    "pass --decode cpu or change those", config.dataset, config.data_loading));
  }
  if (config.data_loading == "stream") {
    if (config.dataset != "imagefolder" && config.dataset != "webdataset") {
      throw BadInputError(fmt::format("--data-loading stream decodes image files as they are read, which --dataset {} "
                                      "does not have (it is held in memory); use --data-loading auto or memory, or "
                                      "--dataset imagefolder / webdataset", config.dataset));
    }
    if (config.augment != "none" && config.augment != "resize" && config.augment != "rrc-flip") {
      throw BadInputError(fmt::format("--data-loading stream crops each image as it decodes it: --augment none, resize "
                                      "or rrc-flip, not {}; change --augment or use --data-loading memory",
                                      config.augment));
    }
    if (config.data_on_device) {
      throw BadInputError("--data-on-device keeps the decoded training set on the device, which --data-loading "
                          "stream never holds; drop one of them");
    }
  }
  if (config.data_on_device) {
    if (config.mode == Mode::kDp) {
      throw BadInputError("--data-on-device cannot be combined with --mode dp, whose replicas each copy their slice "
                          "of a host batch; use --mode ddp or single");
    }
    if (config.augment != "none") {
      throw BadInputError(fmt::format("--data-on-device builds batches from the stored images and has no "
                                      "augmentation, but --augment is {}; use --augment none or drop --data-on-device",
                                      config.augment));
    }
  }
}

// Thread counts past what can help: --num-workers 100000 ran out of threads mid-start and
// --threads 100000 spent minutes starting OpenMP threads.
void ValidateThreadCounts(const TrainConfig& config) {
  if (config.num_workers > kMaxLoaderThreads) {
    throw BadInputError(fmt::format("--num-workers {} is above the limit of {} loader threads; more only add memory "
                                    "and thread starts (a few per core is plenty, e.g. --num-workers {})",
                                    config.num_workers, kMaxLoaderThreads,
                                    std::min<int64_t>(kMaxLoaderThreads, 2 * MaxIntraOpThreads())));
  }
  if (config.threads > MaxIntraOpThreads()) {
    throw BadInputError(fmt::format("--threads {} is above this machine's {} hardware threads; more intra-op threads "
                                    "only oversubscribe the cores (use at most --threads {}, or 0 for LibTorch's "
                                    "default)",
                                    config.threads, MaxIntraOpThreads(), MaxIntraOpThreads()));
  }
}

// --out must be a folder or name one that can be made: neither it nor a folder above it a file.
void ValidateOutputFolder(const std::string& out) {
  std::string existing = out;
  while (!existing.empty() && !PathExists(existing)) {
    while (existing.size() > 1 && existing.back() == '/') existing.pop_back();
    const size_t slash = existing.rfind('/');
    existing = slash == std::string::npos ? "" : existing.substr(0, std::max<size_t>(slash, 1));
  }
  if (existing.empty() || IsDirectory(existing)) return;
  throw BadInputError(existing == out
                          ? fmt::format("--out {} is an existing file, not a folder; give a folder (it is made if "
                                        "missing)", out)
                          : fmt::format("--out {}: {} is a file, so no folder can be made under it; give another "
                                        "folder", out, existing));
}

// --image-size sizes the images of data sets that have no size of their own (imagefolder,
// webdataset, synthetic). On MNIST, Fashion-MNIST and CIFAR-10 it would be ignored, so a value other
// than the default is refused rather than honoured: resizing them is --img-size's (or --augment
// resize's) job, and the config.yaml of every earlier run holds image-size: 64 whatever its data
// set, which must keep training as it did.
void ValidateImageSize(const TrainConfig& config) {
  const bool sized_by_option = config.dataset == "imagefolder" || config.dataset == "webdataset" ||
                               config.dataset == "synthetic";
  if (sized_by_option || config.image_size == TrainConfig{}.image_size) return;
  throw BadInputError(fmt::format("--image-size {} applies to imagefolder, webdataset and synthetic images only; "
                                  "--dataset {} has images of its own size, which --image-size does not change. To "
                                  "train on them at {} px use --img-size {} (or --augment resize --resize {}); "
                                  "otherwise drop --image-size",
                                  config.image_size, config.dataset, config.image_size, config.image_size,
                                  config.image_size));
}

// A rerun of a saved config.yaml, or a typo in --out, must not silently overwrite a finished run.
void RefuseToReplaceARun(const TrainConfig& config) {
  if (!config.resume.empty() || config.overwrite) return;
  for (const char* file : {"summary.json", "config.yaml"}) {
    if (!PathExists(config.out + "/" + file)) continue;
    throw BadInputError(fmt::format("--out {} already holds a run ({}); continue it with --resume {}, replace it "
                                    "with --overwrite, or give another --out", config.out, file, config.out));
  }
}

}  // namespace

int64_t MaxIntraOpThreads() {
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 256 : static_cast<int64_t>(hardware);
}

void ValidateConfig(const TrainConfig& config) {
  ValidateThreadCounts(config);
  if (!config.out.empty()) {
    ValidateOutputFolder(config.out);
    RefuseToReplaceARun(config);
  }
  if (config.device != "auto" && config.device != "cpu" && config.device != "cuda" &&
      config.device.rfind("cuda:", 0) != 0) {
    throw BadInputError(fmt::format("--device '{}' is not one of: auto, cpu, cuda, cuda:K",
                                    config.device));
  }
  if (config.device.rfind("cuda:", 0) == 0) {
    const std::string index = config.device.substr(5);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) {
      throw BadInputError(fmt::format("--device '{}': the device index after 'cuda:' must be a "
                                      "number, e.g. cuda:0", config.device));
    }
  }
  if (config.optimizer != "sgd" && (config.momentum != 0 || config.nesterov)) {
    throw BadInputError(fmt::format("--momentum and --nesterov apply to --optimizer sgd only, not '{}'",
                                    config.optimizer));
  }
  if (config.nesterov && config.momentum <= 0) {
    throw BadInputError("--nesterov needs --momentum > 0");
  }
  if (config.label_smoothing >= 1) {
    throw BadInputError(fmt::format("--label-smoothing {} must be below 1 (0: off, 0.1 is common)",
                                    config.label_smoothing));
  }
  ValidateImageSize(config);
  ValidateAugmentOptions(AugmentOptionsFrom(config));
  ValidateSpeedOptions(config);
}

AugmentOptions AugmentOptionsFrom(const TrainConfig& config) {
  return AugmentOptions{config.augment,          config.affine_degrees,   config.affine_translate,
                        config.affine_scale_min, config.affine_scale_max, config.affine_interpolation,
                        config.crop_padding,     config.resize,           config.seed};
}

double EffectiveLr(const TrainConfig& config) {
  return config.lr_scale_rule == "linear" ? config.lr * static_cast<double>(config.batch_size) / 256.0 : config.lr;
}

int64_t TotalSteps(const TrainConfig& config, int64_t steps_per_epoch) {
  const int64_t epochs_steps = config.epochs * steps_per_epoch;
  return config.max_steps > 0 ? std::min(config.max_steps, epochs_steps) : epochs_steps;
}

int64_t MetricsRowInterval(const TrainConfig& config, int64_t steps_per_epoch) {
  if (config.log_every > 0) return config.log_every;
  return std::clamp<int64_t>(TotalSteps(config, steps_per_epoch) / 10, 1, kMaxAutoLogEvery);
}

bool WritesMetricsRow(int64_t first_step, int64_t total_steps, int64_t interval, int64_t steps_per_epoch) {
  auto next_multiple = [first_step](int64_t n) { return (first_step / std::max<int64_t>(n, 1) + 1) * n; };
  return std::min(next_multiple(interval), next_multiple(steps_per_epoch)) <= total_steps;
}

std::string ConfigToYaml(const TrainConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const auto& spec : TrainOptions()) {
    if (spec.saved) out << YAML::Key << spec.name << YAML::Value << spec.get(config);
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace mgpu
