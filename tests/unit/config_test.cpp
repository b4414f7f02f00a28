// Specification of mgpu-worker's configuration: defaults < YAML file < flags; aliases;
// every bad key or value is a BadInputError that names it.
#include <functional>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "common/status.h"
#include "config/command_line.h"
#include "models/model_factory.h"
#include "tests/support/test_support.h"
#include "worker/channels_last_choice.h"
#include "worker/train_config.h"

namespace mgpu {
namespace {

using testing::TempDir;
using testing::WriteBytes;

TEST(TrainConfig, YamlFileSetsOptionsByNameOrAlias) {
  TempDir dir;
  WriteBytes(dir / "c.yaml", "model: lenet\nbatch_size: 32\nnum-workers: 4\nlr: 0.01\noptimizer: sgd\n");
  TrainConfig config;
  ApplyYamlFile(config, dir / "c.yaml");
  EXPECT_EQ(config.batch_size, 32);
  EXPECT_EQ(config.num_workers, 4);
  EXPECT_DOUBLE_EQ(config.lr, 0.01);
  EXPECT_EQ(config.optimizer, "sgd");
}

TEST(TrainConfig, UnknownYamlKeyIsAnErrorNamingKeyLineAndSuggestion) {
  TempDir dir;
  WriteBytes(dir / "c.yaml", "epochs: 2\nbatch-sise: 32\n");
  TrainConfig config;
  try {
    ApplyYamlFile(config, dir / "c.yaml");
    FAIL() << "expected BadInputError";
  } catch (const BadInputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("c.yaml:2"), std::string::npos) << message;
    EXPECT_NE(message.find("unknown key 'batch-sise'"), std::string::npos) << message;
    EXPECT_NE(message.find("did you mean 'batch-size'"), std::string::npos) << message;
  }
}

TEST(TrainConfig, BadValueNamesKeyAndAcceptedValues) {
  TempDir dir;
  WriteBytes(dir / "c.yaml", "optimizer: rmsprop\n");
  TrainConfig config;
  try {
    ApplyYamlFile(config, dir / "c.yaml");
    FAIL() << "expected BadInputError";
  } catch (const BadInputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("key 'optimizer'"), std::string::npos) << message;
    EXPECT_NE(message.find("sgd, adam"), std::string::npos) << message;
  }
}

TEST(TrainConfig, NonScalarAndMalformedYamlAreErrors) {
  TempDir dir;
  WriteBytes(dir / "list.yaml", "epochs: [1, 2]\n");
  WriteBytes(dir / "broken.yaml", "epochs: 1\n  batch-size: : 3\n");
  WriteBytes(dir / "scalar.yaml", "just a string\n");
  TrainConfig config;
  EXPECT_THROW(ApplyYamlFile(config, dir / "list.yaml"), BadInputError);
  EXPECT_THROW(ApplyYamlFile(config, dir / "broken.yaml"), BadInputError);
  EXPECT_THROW(ApplyYamlFile(config, dir / "scalar.yaml"), BadInputError);
  EXPECT_THROW(ApplyYamlFile(config, dir / "missing.yaml"), BadInputError);
}

std::string YamlError(const std::string& path) {
  return testing::BadInputMessage([&] {
    TrainConfig config;
    ApplyYamlFile(config, path);
  });
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(TrainConfig, AConfigThatIsAFolderIsBadInputNamingIt) {
  TempDir dir;
  const std::string message = YamlError(dir.path());
  EXPECT_TRUE(Contains(message, "config file " + dir.path() + " is a folder")) << message;
}

TEST(TrainConfig, AListOrMappingWhereAValueGoesNamesFileKeyLineAndTheTypeExpected) {
  TempDir dir;
  WriteBytes(dir / "list.yaml", "model: lenet\nepochs: [1, 2]\n");
  std::string message = YamlError(dir / "list.yaml");
  EXPECT_TRUE(Contains(message, dir / "list.yaml:2: key 'epochs' needs a single value (an integer), not a list")) << message;

  WriteBytes(dir / "map.yaml", "optimizer:\n  kind: sgd\n");
  message = YamlError(dir / "map.yaml");
  EXPECT_TRUE(Contains(message, "map.yaml:1: key 'optimizer' needs a single value (one of: sgd, adam, adamw), not a mapping")) << message;

  WriteBytes(dir / "list-key.yaml", "epochs: 1\n[lr, momentum]: 0.1\n");
  message = YamlError(dir / "list-key.yaml");
  EXPECT_TRUE(Contains(message, "list-key.yaml:2: a key must be an option name, not a list or mapping")) << message;
}

TEST(TrainConfig, AnOptionGivenTwiceNamesTheKeyAndBothLines) {
  TempDir dir;
  WriteBytes(dir / "twice.yaml", "epochs: 1\nlr: 0.1\nepochs: 2\n");
  std::string message = YamlError(dir / "twice.yaml");
  EXPECT_TRUE(Contains(message, "twice.yaml:3: key 'epochs' sets option 'epochs' again, already set by 'epochs' on "
                                "line 1")) << message;

  WriteBytes(dir / "alias.yaml", "batch-size: 8\nbatch_size: 16\n");
  message = YamlError(dir / "alias.yaml");
  EXPECT_TRUE(Contains(message, "alias.yaml:2: key 'batch_size' sets option 'batch-size' again, already set by "
                                "'batch-size' on line 1")) << message;
}

TEST(TrainConfig, ThreadCountsAreBounded) {
  TrainConfig config;
  config.num_workers = kMaxLoaderThreads;
  config.threads = MaxIntraOpThreads();
  ValidateConfig(config);

  config.num_workers = 100000;
  std::string message = testing::BadInputMessage([&] { ValidateConfig(config); });
  EXPECT_TRUE(Contains(message, "--num-workers 100000 is above the limit of 256 loader threads")) << message;

  config.num_workers = 0;
  config.threads = 100000;
  message = testing::BadInputMessage([&] { ValidateConfig(config); });
  EXPECT_TRUE(Contains(message, fmt::format("--threads 100000 is above this machine's {} hardware threads",
                                            MaxIntraOpThreads()))) << message;
}

TEST(TrainConfig, OutMustNotBeOrLieUnderAFile) {
  TempDir dir;
  WriteBytes(dir / "file", "x");
  TrainConfig config;
  config.out = dir / "file";
  std::string message = testing::BadInputMessage([&] { ValidateConfig(config); });
  EXPECT_TRUE(Contains(message, "--out " + dir / "file" + " is an existing file, not a folder")) << message;

  config.out = dir / "file/run/";
  message = testing::BadInputMessage([&] { ValidateConfig(config); });
  EXPECT_TRUE(Contains(message, dir / "file" + " is a file, so no folder can be made under it")) << message;

  config.out = dir / "new/run";
  ValidateConfig(config);
  config.out = dir.path();
  ValidateConfig(config);
  config.out = "relative-run-folder";
  ValidateConfig(config);
}

TEST(TrainConfig, ArgumentsAfterDoubleDashAreNotOptions) {
  int exit_code = 0;
  const std::string message = testing::BadInputMessage(
      [&] { ParseWorkerCommandLine({"--epochs", "1", "--", "--data-dir", "data"}, exit_code); });
  EXPECT_TRUE(Contains(message, "'--data-dir' follows `--`, after which arguments are not options")) << message;
  EXPECT_FALSE(Contains(message, "did you mean")) << message;
}

TEST(TrainConfig, NumbersAreCheckedForTypeAndRange) {
  TrainConfig config;
  const OptionSpec* batch = FindTrainOption("batch-size");
  ASSERT_NE(batch, nullptr);
  EXPECT_THROW(batch->set(config, "abc"), BadInputError);
  EXPECT_THROW(batch->set(config, "0"), BadInputError);
  EXPECT_THROW(batch->set(config, "12x"), BadInputError);
  EXPECT_THROW(FindTrainOption("lr")->set(config, "-1"), BadInputError);
  EXPECT_THROW(FindTrainOption("lr")->set(config, "nan"), BadInputError);
  batch->set(config, "128");
  EXPECT_EQ(config.batch_size, 128);
}

TEST(TrainConfig, SeedStyleSpellingsAreAliases) {
  TrainConfig config;
  EXPECT_EQ(FindTrainOption("batch_size"), FindTrainOption("batch-size"));
  EXPECT_EQ(FindTrainOption("num_workers"), FindTrainOption("num-workers"));
  FindTrainOption("mode")->set(config, "base");
  EXPECT_EQ(config.mode, Mode::kSingle);
  FindTrainOption("mode")->set(config, "DP");
  EXPECT_EQ(config.mode, Mode::kDp);
  EXPECT_EQ(FindTrainOption("dp_devices"), FindTrainOption("dp-devices"));
  EXPECT_EQ(FindTrainOption("no-such-option"), nullptr);
}

TEST(TrainConfig, EffectiveConfigRoundTripsThroughYaml) {
  TrainConfig config;
  config.batch_size = 17;
  config.lr = 0.125;
  config.optimizer = "sgd";
  config.data_dir = "/some/where";
  TempDir dir;
  WriteBytes(dir / "effective.yaml", ConfigToYaml(config));
  TrainConfig reloaded;
  ApplyYamlFile(reloaded, dir / "effective.yaml");
  EXPECT_EQ(ConfigToYaml(reloaded), ConfigToYaml(config));
  EXPECT_EQ(reloaded.batch_size, 17);
  EXPECT_EQ(reloaded.data_dir, "/some/where");
}

TEST(TrainConfig, ValidationRejectsBadDevicesAndMisplacedMomentum) {
  TrainConfig config;
  config.device = "gpu";
  EXPECT_THROW(ValidateConfig(config), BadInputError);
  config.device = "cuda:x";
  EXPECT_THROW(ValidateConfig(config), BadInputError);
  config.device = "cuda:1";
  EXPECT_NO_THROW(ValidateConfig(config));
  config.device = "cpu";
  config.optimizer = "adam";
  config.momentum = 0.5;
  EXPECT_THROW(ValidateConfig(config), BadInputError);
}

TEST(TrainConfig, ModelAndDatasetChoicesComeFromTheirFactories) {
  TrainConfig config;
  for (const char* model : {"alexnet", "vgg19", "resnet50"}) {
    FindTrainOption("model")->set(config, model);
    EXPECT_EQ(config.model, model);
  }
  for (const char* dataset : {"cifar10", "imagefolder", "synthetic"}) {
    FindTrainOption("dataset")->set(config, dataset);
    EXPECT_EQ(config.dataset, dataset);
  }
  EXPECT_THROW(FindTrainOption("model")->set(config, "vgg19_bn"), BadInputError);
  EXPECT_THROW(FindTrainOption("dataset")->set(config, "imagenet"), BadInputError);
}

// A user's model (torchscript:PATH, plugin:LIB:NAME) is taken as written: paths are case-sensitive.
TEST(TrainConfig, UserModelsAreKeptVerbatimWhileBuiltinsMatchAnySpelling) {
  TrainConfig config;
  for (const char* model : {"torchscript:Models/My_Net.PT", "plugin:./libNets.so:Tiny_CNN"}) {
    FindTrainOption("model")->set(config, model);
    EXPECT_EQ(config.model, model);
  }
  FindTrainOption("model")->set(config, "ResNet-18");
  EXPECT_EQ(config.model, "resnet18");
  try {
    FindTrainOption("model")->set(config, "resnt18");
    FAIL() << "expected BadInputError";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'resnet18'?"), std::string::npos) << e.what();
  }
}

TEST(TrainConfig, StateDictExportIsOnByDefaultAndCanBeTurnedOff) {
  EXPECT_TRUE(TrainConfig{}.save_state_dict);
  TempDir dir;
  WriteBytes(dir / "c.yaml", "save_state_dict: false\n");
  TrainConfig config;
  ApplyYamlFile(config, dir / "c.yaml");
  EXPECT_FALSE(config.save_state_dict);
}

TEST(TrainConfig, AugmentationOptionsReachTheAugmentation) {
  TempDir dir;
  WriteBytes(dir / "c.yaml",
             "augment: affine\naffine-degrees: 15\naffine_translate: 0.2\naffine-scale: 0.8,1.25\n"
             "affine-interpolation: bilinear\nseed: 9\n");
  TrainConfig config;
  ApplyYamlFile(config, dir / "c.yaml");
  const AugmentOptions options = AugmentOptionsFrom(config);
  EXPECT_EQ(options.kind, "affine");
  EXPECT_DOUBLE_EQ(options.affine_degrees, 15);
  EXPECT_DOUBLE_EQ(options.affine_translate, 0.2);
  EXPECT_DOUBLE_EQ(options.affine_scale_min, 0.8);
  EXPECT_DOUBLE_EQ(options.affine_scale_max, 1.25);
  EXPECT_EQ(options.affine_interpolation, "bilinear");
  EXPECT_EQ(options.seed, 9u);
  EXPECT_EQ(FindTrainOption("affine-scale")->get(config), "0.8,1.25");
  EXPECT_THROW(FindTrainOption("affine-scale")->set(config, "1.1"), BadInputError);
  EXPECT_THROW(FindTrainOption("affine-scale")->set(config, "1.1,0.9"), BadInputError);
  EXPECT_THROW(FindTrainOption("augment")->set(config, "mixup"), BadInputError);
}

TEST(TrainConfig, ValidationRejectsImpossibleAugmentation) {
  TrainConfig config;
  config.augment = "resize";
  EXPECT_THROW(ValidateConfig(config), BadInputError);  // --resize N is needed
  config.resize = 227;
  EXPECT_NO_THROW(ValidateConfig(config));
  config.augment = "affine";
  config.affine_translate = 2;
  EXPECT_THROW(ValidateConfig(config), BadInputError);
}

TEST(TrainConfig, DatasetOptionsCarryImageSizeBadImagePolicyAndSeed) {
  TrainConfig config;
  FindTrainOption("image-size")->set(config, "256");
  FindTrainOption("on-bad-image")->set(config, "skip");
  FindTrainOption("synthetic-train")->set(config, "500");
  FindTrainOption("synthetic-channels")->set(config, "1");
  config.seed = 3;
  const DatasetOptions options = DatasetOptionsFrom(config);
  EXPECT_EQ(options.image_size, 256);
  EXPECT_EQ(options.on_bad_image, "skip");
  EXPECT_EQ(options.synthetic_train, 500);
  EXPECT_EQ(options.synthetic_test, 10000);
  EXPECT_EQ(options.synthetic_channels, 1);
  EXPECT_EQ(options.seed, 3u);
  EXPECT_THROW(FindTrainOption("synthetic-channels")->set(config, "2"), BadInputError);
  EXPECT_THROW(FindTrainOption("on-bad-image")->set(config, "ignore"), BadInputError);
}

TEST(TrainConfig, TheCpuAssistOfGpuDecodingIsOnUnlessTurnedOff) {
  TrainConfig config;
  EXPECT_TRUE(config.cpu_assist);
  FindTrainOption("cpu-assist")->set(config, "false");
  EXPECT_FALSE(config.cpu_assist);
  EXPECT_EQ(FindTrainOption("cpu-assist")->get(config), "false");
  FindTrainOption("cpu-assist")->set(config, "on");
  EXPECT_TRUE(config.cpu_assist);
  EXPECT_THROW(FindTrainOption("cpu-assist")->set(config, "sometimes"), BadInputError);
}

TEST(TrainConfig, CudnnBenchmarkIsOnUnlessTurnedOff) {
  TrainConfig config;
  EXPECT_TRUE(config.cudnn_benchmark) << "as torch.backends.cudnn.benchmark = True";
  FindTrainOption("cudnn_benchmark")->set(config, "false");
  EXPECT_FALSE(config.cudnn_benchmark);
  EXPECT_EQ(FindTrainOption("cudnn-benchmark")->get(config), "false");
  EXPECT_EQ(FindTrainOption("cudnn-benchmark")->flag_value, "true") << "a bare --cudnn-benchmark";
  EXPECT_THROW(FindTrainOption("cudnn-benchmark")->set(config, "fastest"), BadInputError);
}

TEST(TrainConfig, FusedKernelsAreOnUnlessTurnedOff) {
  TrainConfig config;
  EXPECT_TRUE(config.fused_kernels);
  FindTrainOption("fused_kernels")->set(config, "false");
  EXPECT_FALSE(config.fused_kernels);
  EXPECT_EQ(FindTrainOption("fused-kernels")->get(config), "false");
  EXPECT_THROW(FindTrainOption("fused-kernels")->set(config, "mgpu"), BadInputError);
}

TEST(TrainConfig, MixedPrecisionOptionsParseAndRejectBadValues) {
  TrainConfig config;
  FindTrainOption("precision")->set(config, "o2");
  FindTrainOption("loss_scale")->set(config, "dynamic");
  FindTrainOption("on-nonfinite")->set(config, "skip");
  FindTrainOption("grad_clip")->set(config, "1.5");
  EXPECT_EQ(config.precision, Precision::kO2);
  EXPECT_EQ(LossScalingText(config.loss_scale), "dynamic");
  EXPECT_EQ(config.on_nonfinite, OnNonfinite::kSkip);
  EXPECT_EQ(config.grad_clip, 1.5);
  FindTrainOption("loss-scale")->set(config, "1024");
  EXPECT_EQ(LossScalingText(config.loss_scale), "1024");
  EXPECT_THROW(FindTrainOption("loss-scale")->set(config, "0"), BadInputError);
  EXPECT_THROW(FindTrainOption("on-nonfinite")->set(config, "ignore"), BadInputError);
  EXPECT_THROW(FindTrainOption("grad-clip")->set(config, "-1"), BadInputError);
  EXPECT_THROW(FindTrainOption("dtype")->set(config, "fp64"), BadInputError);
}

TEST(TrainConfig, DtypeAndAmpResolveIntoPrecisionAndShowTheResolvedPolicy) {
  TrainConfig config;
  FindTrainOption("dtype")->set(config, "bf16");
  FindTrainOption("amp")->set(config, "true");
  ResolveSeedSpellings(config);
  EXPECT_EQ(config.precision, Precision::kAmpBf16);
  EXPECT_EQ(FindTrainOption("dtype")->get(config), "bf16");
  EXPECT_EQ(FindTrainOption("amp")->get(config), "true");

  TrainConfig o2;  // agreeing spellings are accepted and keep the policy
  o2.precision = Precision::kO2;
  o2.dtype = "fp16";
  ResolveSeedSpellings(o2);
  EXPECT_EQ(o2.precision, Precision::kO2);
  EXPECT_EQ(FindTrainOption("amp")->get(o2), "false");

  TrainConfig conflict;
  conflict.precision = Precision::kTf32;
  conflict.dtype = "bf16";
  conflict.amp = true;
  try {
    ResolveSeedSpellings(conflict);
    FAIL() << "expected BadInputError";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("--precision tf32 conflicts with --dtype bf16 --amp"), std::string::npos)
        << e.what();
  }
}

TEST(TrainConfig, ResolvedConfigRoundTripsThroughYaml) {
  TempDir dir;
  TrainConfig config;
  config.precision = Precision::kO2;
  config.loss_scale = ParseLossScaling("dynamic");
  config.grad_clip = 2;
  WriteBytes(dir / "c.yaml", ConfigToYaml(config));
  TrainConfig back;
  ApplyYamlFile(back, dir / "c.yaml");
  ResolveSeedSpellings(back);
  EXPECT_EQ(ConfigToYaml(back), ConfigToYaml(config));
}

}  // namespace
}  // namespace mgpu

namespace mgpu {
namespace {

TEST(TrainConfig, ScheduleOptionsBecomeTheSchedulersOptions) {
  TrainConfig config;
  const std::vector<std::pair<std::string, std::string>> flags = {
      {"scheduler", "cosine"}, {"milestones", "3,8"}, {"gamma", "0.5"}, {"warmup-epochs", "1.5"},
      {"min-lr", "0.0001"}, {"plateau-factor", "0.2"}, {"plateau-patience", "4"}, {"lr-scale-rule", "linear"},
      {"label-smoothing", "0.1"}, {"checkpoint-every", "100"}, {"resume", "runs/a"}};
  for (const auto& [name, value] : flags) FindTrainOption(name)->set(config, value);
  config.lr = 0.1;
  config.batch_size = 512;
  config.epochs = 10;
  EXPECT_EQ(EffectiveLr(config), 0.2) << "lr x global batch / 256";
  const SchedulerOptions options = SchedulerOptionsFrom(config, /*steps_per_epoch=*/20);
  EXPECT_EQ(options.kind, "cosine");
  EXPECT_EQ(options.base_lr, 0.2);
  EXPECT_EQ(options.milestones, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(options.gamma, 0.5);
  EXPECT_EQ(options.warmup_steps, 30);
  EXPECT_EQ(options.total_steps, 200) << "the whole run, whatever --max-steps";
  EXPECT_EQ(options.min_lr, 0.0001);
  EXPECT_EQ(options.plateau_factor, 0.2);
  EXPECT_EQ(options.plateau_patience, 4);
  EXPECT_EQ(config.label_smoothing, 0.1);
  EXPECT_EQ(config.checkpoint_every, 100);
  EXPECT_EQ(config.resume, "runs/a");

  TempDir dir;
  WriteBytes(dir / "effective.yaml", ConfigToYaml(config));
  TrainConfig reloaded;
  ApplyYamlFile(reloaded, dir / "effective.yaml");
  EXPECT_EQ(ConfigToYaml(reloaded), ConfigToYaml(config));
  TrainConfig defaults;
  WriteBytes(dir / "defaults.yaml", ConfigToYaml(defaults));
  ApplyYamlFile(reloaded, dir / "defaults.yaml");
  EXPECT_TRUE(reloaded.milestones.empty()) << "no milestones round-trip as none";
}

TEST(TrainConfig, ScheduleOptionsRejectBadValues) {
  TrainConfig config;
  EXPECT_THROW(FindTrainOption("milestones")->set(config, "8,3"), BadInputError);
  EXPECT_THROW(FindTrainOption("milestones")->set(config, "3,x"), BadInputError);
  EXPECT_THROW(FindTrainOption("scheduler")->set(config, "step"), BadInputError);
  EXPECT_THROW(FindTrainOption("lr-scale-rule")->set(config, "sqrt"), BadInputError);
  config.label_smoothing = 1.0;
  EXPECT_NE(testing::BadInputMessage([&] { ValidateConfig(config); }).find("--label-smoothing"), std::string::npos);
}


// The speed options are refused, with the conflicting option named, where they cannot work.
TEST(TrainConfig, SpeedOptionsRefuseWhatTheyDoNotSupport) {
  auto refusal = [](const std::function<void(TrainConfig&)>& set) {
    TrainConfig config;
    set(config);
    return testing::BadInputMessage([&] { ValidateConfig(config); });
  };
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.mode = Mode::kDdp; c.backend = "gloo"; })
                .find("--backend gloo (only NCCL's collectives run inside a CUDA graph)"),
            std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.mode = Mode::kDdp; c.backend = "mpi"; }).find("--backend mpi"),
            std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.mode = Mode::kDdp; c.grad_accum = 2; }).find("--grad-accum 2"),
            std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.device = "cpu"; }).find("--device cpu"), std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.grad_accum = 2; }).find("--grad-accum 2"),
            std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.grad_clip = 1; }).find("--grad-clip"), std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.precision = Precision::kO2; }).find("--precision o2"),
            std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.data_on_device = true; c.mode = Mode::kDp; }).find("--mode dp"), std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.data_on_device = true; c.augment = "affine"; }).find("--augment none"),
            std::string::npos);
  EXPECT_NE(refusal([](TrainConfig& c) { c.cuda_graphs = true; c.mode = Mode::kDp; c.dp_impl = "libtorch"; })
                .find("--dp-impl libtorch"),
            std::string::npos);
  TrainConfig supported;
  supported.cuda_graphs = supported.data_on_device = true;
  supported.channels_last = true;
  supported.precision = Precision::kAmpBf16;
  EXPECT_NO_THROW(ValidateConfig(supported));
  // Under DDP the graph holds the whole step, NCCL's all-reduces included.
  for (const std::string backend : {"auto", "nccl"}) {
    TrainConfig graphed_ddp;
    graphed_ddp.cuda_graphs = true;
    graphed_ddp.mode = Mode::kDdp;
    graphed_ddp.backend = backend;
    EXPECT_NO_THROW(ValidateConfig(graphed_ddp)) << backend;
  }
  // With --mode dp only the replicas' forward + backward are graphs: the eager rest of the step
  // may accumulate, clip and keep master weights.
  TrainConfig data_parallel;
  data_parallel.cuda_graphs = true;
  data_parallel.mode = Mode::kDp;
  data_parallel.grad_accum = 2;
  data_parallel.grad_clip = 1;
  data_parallel.precision = Precision::kO2;
  EXPECT_NO_THROW(ValidateConfig(data_parallel));
}

TEST(TrainConfig, AmpResolvesForTheDeviceOnceItIsKnown) {
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{{"--amp"}, {"--dtype", "fp16", "--amp"}}) {
    int exit_code = 0;
    TrainConfig cpu = *ParseWorkerCommandLine(flags, exit_code);
    TrainConfig gpu = cpu;
    ResolvePrecisionForDevice(cpu, /*cuda=*/false);
    EXPECT_EQ(cpu.precision, Precision::kAmpBf16) << flags.size();
    EXPECT_NE(cpu.precision_note.find("on CPU means amp-bf16"), std::string::npos) << cpu.precision_note;
    EXPECT_EQ(FindTrainOption("dtype")->get(cpu), "bf16") << "config.yaml holds the policy that ran";
    ResolvePrecisionForDevice(gpu, /*cuda=*/true);
    EXPECT_EQ(gpu.precision, Precision::kAmpFp16);
  }
  int exit_code = 0;
  TrainConfig named = *ParseWorkerCommandLine({"--precision", "amp-fp16"}, exit_code);
  ResolvePrecisionForDevice(named, /*cuda=*/false);
  EXPECT_EQ(named.precision, Precision::kAmpFp16);
  EXPECT_NE(named.precision_warning.find("--precision amp-fp16 on CPU"), std::string::npos) << named.precision_warning;
}

// 20 steps at the old fixed 50 wrote no row at all: the interval follows the run's length.
TEST(TrainConfig, UnsetLogEveryGivesAboutTenRowsPerRunAndAtMostFifty) {
  TrainConfig config;
  EXPECT_EQ(config.log_every, 0);
  config.max_steps = 20;
  EXPECT_EQ(TotalSteps(config, 1875), 20);
  EXPECT_EQ(MetricsRowInterval(config, 1875), 2);
  config.max_steps = 5;
  EXPECT_EQ(MetricsRowInterval(config, 1875), 1);
  config.max_steps = 0;
  config.epochs = 2;
  EXPECT_EQ(TotalSteps(config, 150), 300);
  EXPECT_EQ(MetricsRowInterval(config, 150), 30);
  EXPECT_EQ(MetricsRowInterval(config, 1875), kMaxAutoLogEvery);
  config.log_every = 7;
  EXPECT_EQ(MetricsRowInterval(config, 1875), 7) << "a given --log-every is kept";
}

TEST(TrainConfig, ARunWithoutAMetricsRowIsFoundBeforeItStarts) {
  EXPECT_FALSE(WritesMetricsRow(/*first_step=*/0, /*total_steps=*/20, /*interval=*/50, /*steps_per_epoch=*/1875));
  EXPECT_TRUE(WritesMetricsRow(0, 20, 50, 20)) << "the epoch's end writes a row";
  EXPECT_TRUE(WritesMetricsRow(0, 20, 20, 1875));
  EXPECT_TRUE(WritesMetricsRow(13, 20, 4, 1875)) << "resumed at 13: a row at 16";
  EXPECT_FALSE(WritesMetricsRow(13, 15, 4, 1875)) << "resumed at 13, stopped at 15: none";
}

TEST(TrainConfig, ImageSizeOnADataSetOfFixedSizeIsRefusedNamingImgSize) {
  TrainConfig config;  // fashion-mnist
  EXPECT_NO_THROW(ValidateConfig(config)) << "the default, as every earlier config.yaml holds it";
  config.image_size = 300;
  const std::string message = testing::BadInputMessage([&] { ValidateConfig(config); });
  EXPECT_NE(message.find("--image-size 300 applies to imagefolder, webdataset and synthetic"), std::string::npos)
      << message;
  EXPECT_NE(message.find("--img-size 300"), std::string::npos) << message;
  for (const std::string dataset : {"imagefolder", "synthetic", "webdataset"}) {
    config.dataset = dataset;
    EXPECT_NO_THROW(ValidateConfig(config)) << dataset;
  }
}

TEST(TrainConfig, WandbFlagsAndKeysSayMgpuWritesTensorBoardEvents) {
  int exit_code = 0;
  const std::string flag = testing::BadInputMessage([&] { ParseWorkerCommandLine({"--wandb"}, exit_code); });
  EXPECT_NE(flag.find("unknown flag --wandb"), std::string::npos) << flag;
  EXPECT_NE(flag.find("TensorBoard events"), std::string::npos) << flag;
  TempDir dir;
  WriteBytes(dir / "c.yaml", "wandb_project: mnist\n");
  TrainConfig config;
  const std::string key = testing::BadInputMessage([&] { ApplyYamlFile(config, dir / "c.yaml"); });
  EXPECT_NE(key.find("unknown key 'wandb_project'"), std::string::npos) << key;
  EXPECT_NE(key.find("TensorBoard events"), std::string::npos) << key;
  EXPECT_EQ(ForeignOptionHint("batch-sise"), "");
}

TEST(TrainConfig, EvalMaxSamplesIsAnOptionOfZeroOrMore) {
  TrainConfig config;
  EXPECT_EQ(config.eval_max_samples, 0) << "all test images by default";
  FindTrainOption("eval_max_samples")->set(config, "500");
  EXPECT_EQ(config.eval_max_samples, 500);
  EXPECT_THROW(FindTrainOption("eval-max-samples")->set(config, "-1"), BadInputError);
}

TEST(TrainConfig, DdpOptionsFollowTheirFlags) {
  TrainConfig config;
  FindTrainOption("bucket-cap-mb")->set(config, "4");
  FindTrainOption("last-bucket-cap-mb")->set(config, "0.5");
  FindTrainOption("gradient-as-bucket-view")->set(config, "false");
  FindTrainOption("find-unused-parameters")->set(config, "true");
  FindTrainOption("broadcast-buffers")->set(config, "false");
  FindTrainOption("ddp-compression")->set(config, "bf16");
  const DdpOptions options = DdpOptionsFrom(config);
  EXPECT_EQ(options.bucket_cap_bytes, 4 << 20);
  EXPECT_EQ(options.last_bucket_cap_bytes, 1 << 19);
  EXPECT_FALSE(options.gradient_as_bucket_view);
  EXPECT_TRUE(options.find_unused_parameters);
  EXPECT_FALSE(options.broadcast_buffers);
  EXPECT_EQ(options.compression, DdpCompression::kBf16);
  EXPECT_EQ(DdpOptionsFrom(TrainConfig{}).bucket_cap_bytes, DdpOptions{}.bucket_cap_bytes) << "c10d's 25 MiB";
}

TEST(TrainConfig, ChannelsLastIsAutoTrueOrFalseAndWorksInEveryMode) {
  TrainConfig config;
  EXPECT_EQ(FindTrainOption("channels-last")->get(config), "auto") << "the default";
  EXPECT_EQ(FindTrainOption("channels-last")->flag_value, "true") << "a bare --channels-last";
  FindTrainOption("channels_last")->set(config, "true");
  EXPECT_EQ(config.channels_last, std::optional<bool>(true));
  FindTrainOption("channels-last")->set(config, "off");
  EXPECT_EQ(config.channels_last, std::optional<bool>(false));
  EXPECT_EQ(FindTrainOption("channels-last")->get(config), "false");
  FindTrainOption("channels-last")->set(config, "Auto");
  EXPECT_EQ(config.channels_last, std::nullopt);
  EXPECT_NE(testing::BadInputMessage([&] { FindTrainOption("channels-last")->set(config, "nhwc"); })
                .find("'nhwc' is not auto, true or false"),
            std::string::npos);
  for (const Mode mode : {Mode::kSingle, Mode::kDdp, Mode::kDp}) {
    TrainConfig channels_last;
    channels_last.mode = mode;
    channels_last.channels_last = true;
    EXPECT_NO_THROW(ValidateConfig(channels_last)) << ModeName(mode);
  }
}

// The auto rule: NHWC for 16-bit convolutional nets on CUDA, nothing else; an explicit value wins.
TEST(ChannelsLastChoice, AutoIsOnForSixteenBitConvolutionalNetsOnCudaOnly) {
  const torch::Device cuda(torch::kCUDA, 0), cpu(torch::kCPU);
  auto resnet = MakeModel("resnet18", ModelShape{3, 10, 32, 32});
  auto lenet = MakeModel("lenet", ModelShape{1, 10, 28, 28});
  const ChannelsLastChoice on = ChooseChannelsLast(std::nullopt, *resnet, cuda, Precision::kAmpBf16);
  EXPECT_TRUE(on.on);
  EXPECT_NE(on.reason.find("auto: a convolutional net on CUDA under amp-bf16"), std::string::npos) << on.reason;
  EXPECT_TRUE(ChooseChannelsLast(std::nullopt, *resnet, cuda, Precision::kAmpFp16).on);
  EXPECT_TRUE(ChooseChannelsLast(std::nullopt, *resnet, cuda, Precision::kFp16).on);
  const ChannelsLastChoice float32 = ChooseChannelsLast(std::nullopt, *resnet, cuda, Precision::kFp32);
  EXPECT_FALSE(float32.on);
  EXPECT_NE(float32.reason.find("off under fp32"), std::string::npos) << float32.reason;
  const ChannelsLastChoice on_cpu = ChooseChannelsLast(std::nullopt, *resnet, cpu, Precision::kAmpBf16);
  EXPECT_FALSE(on_cpu.on);
  EXPECT_NE(on_cpu.reason.find("off on the CPU"), std::string::npos) << on_cpu.reason;
  const ChannelsLastChoice small = ChooseChannelsLast(std::nullopt, *lenet, cuda, Precision::kAmpBf16);
  EXPECT_FALSE(small.on);
  EXPECT_NE(small.reason.find("2550 convolution weights are too few"), std::string::npos) << small.reason;

  const ChannelsLastChoice asked = ChooseChannelsLast(true, *lenet, cpu, Precision::kFp32);
  EXPECT_TRUE(asked.on);
  EXPECT_EQ(asked.reason, "--channels-last true");
  EXPECT_FALSE(ChooseChannelsLast(false, *resnet, cuda, Precision::kAmpBf16).on);
}

}  // namespace
}  // namespace mgpu
