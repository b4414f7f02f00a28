// The user's own models end to end on the CPU, and the state dict every run exports:
//   - a TorchScript module saved by the pinned Python torch trains in --mode single, ddp (two
//     gloo ranks) and dp (two CPU replicas), above chance, ddp and dp ending where single does
//     within float32 reordering; train()/eval() reach the script module;
//   - the example plugin (tests/plugins/tiny_cnn_plugin.cpp) trains, dp replicas included;
//   - model_state_dict.pt of resnet18, vgg11 and alexnet loads into torchvision's architecture
//     (tests/integration/torchvision_state_dict.py) with strict=True through
//     torch.load(weights_only=True), and gets mgpu's test accuracy back (to one image);
//   - under --precision o2 the export holds the optimizer's float32 master weights;
//   - each way a user's model can be wrong exits with code 2 and a message that names the model,
//     the file and the fix.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/files.h"
#include "data/augment.h"
#include "data/batch_loader.h"
#include "data/datasets.h"
#include "models/torchscript_model.h"
#include "tests/support/test_support.h"
#include "worker/state_dict_export.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

// An exported model_state_dict.pt, read back as LibTorch reads a torch.save archive.
c10::impl::GenericDict LoadStateDict(const std::string& path) {
  const std::string bytes = ReadFile(path);
  return torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
}

// A small CNN without batch norm or dropout, so that two ranks with half the batch each compute
// what one process does with all of it.
constexpr char kScriptCnn[] = R"(
import sys, torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.fc = nn.Linear(8 * 14 * 14, 10)
    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))
torch.manual_seed(0)
torch.jit.script(Net()).save(sys.argv[1])
)";

class UserModelsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::string(MGPU_TORCH_PYTHON) != "" && PathExists(MGPU_TORCH_PYTHON))
        << "the Python with LibTorch's torch is missing: run `make deps`, then build again";
  }

  // Runs the Python `script` with the pinned torch, which saves a module to models_/`name`
  // (sys.argv[1]); returns that path. The script is a file: torch.jit.script reads the source
  // of the classes it compiles, which `python -c` has none of.
  std::string SaveScript(const std::string& name, const std::string& script) {
    const std::string path = models_ / name;
    WriteBytes(path + ".py", script);
    const CommandResult saved = RunCommand({MGPU_TORCH_PYTHON, path + ".py", path});
    EXPECT_EQ(saved.exit_code, 0) << saved.output;
    return path;
  }

  std::vector<std::string> Flags(const std::string& data, const std::string& out) {
    return {"--data-dir", data, "--device", "cpu", "--threads", "1", "--optimizer", "sgd", "--lr", "0.05",
            "--momentum", "0.9", "--seed", "5", "--epochs", "1", "--out", out_ / out};
  }

  CommandResult Train(const std::string& model, const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--model", model};
    for (auto& flag : Flags(mnist_.path(), out)) argv.push_back(flag);
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv);
  }

  // Writes the tiny MNIST-like set once per test that trains.
  void WriteData() { WriteTinyMnistLike(mnist_.path(), 640, 200); }

  TempDir mnist_;
  TempDir models_;
  TempDir out_;
};

// The largest ||a - b||_inf / ||b||_inf over the floating-point tensors of two exported state dicts
// (which must have the same names): relative to each tensor's scale, as the rounding bound is.
double MaxRelativeDifference(const std::string& a_path, const std::string& b_path) {
  const auto a = LoadStateDict(a_path);
  const auto b = LoadStateDict(b_path);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto& item : b) {
    const torch::Tensor expected = item.value().toTensor();
    const torch::Tensor got = a.at(item.key()).toTensor();
    if (!expected.is_floating_point()) continue;
    const double scale = std::max(expected.abs().max().item<double>(), 1e-12);
    worst = std::max(worst, (got - expected).abs().max().item<double>() / scale);
  }
  return worst;
}

TEST_F(UserModelsCli, TorchScriptModelTrainsInSingleDdpAndDpModes) {
  WriteData();
  const std::string model = "torchscript:" + SaveScript("cnn.pt", kScriptCnn);
  constexpr int kSteps = 20;
  const std::vector<std::string> steps = {"--max-steps", std::to_string(kSteps), "--batch-size", "32"};
  const CommandResult single = Train(model, "single", steps);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const nlohmann::json summary = ReadSummary(out_ / "single");
  EXPECT_EQ(summary["model"], model);
  EXPECT_EQ(summary["parameters"], 8 * 9 + 8 + 8 * 14 * 14 * 10 + 10);
  EXPECT_GT(summary["test_accuracy"].get<double>(), 30.0) << "chance is 10%";

  const int port = FreeLocalPort();
  std::vector<std::unique_ptr<BackgroundCommand>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--model", model, "--mode", "ddp"};
    for (auto& flag : Flags(mnist_.path(), "ddp")) argv.push_back(flag);
    argv.insert(argv.end(), steps.begin(), steps.end());
    ranks.push_back(std::make_unique<BackgroundCommand>(argv, TorchrunEnvironment(rank, 2, port)));
  }
  for (auto& rank : ranks) {
    const CommandResult result = rank->Wait();
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  std::vector<std::string> dp_flags = steps;
  for (const char* flag : {"--mode", "dp", "--dp-devices", "cpu,cpu"}) dp_flags.push_back(flag);
  const CommandResult dp = Train(model, "dp", dp_flags);
  ASSERT_EQ(dp.exit_code, 0) << dp.output;

  // The longest gradient sum: the conv's weight, over the global batch and its 28x28 outputs.
  const double tolerance = Float32ReorderingTolerance(kSteps, 32 * 28 * 28);
  const std::string reference = out_ / "single/model_state_dict.pt";
  EXPECT_LE(MaxRelativeDifference(out_ / "ddp/model_state_dict.pt", reference), tolerance);
  EXPECT_LE(MaxRelativeDifference(out_ / "dp/model_state_dict.pt", reference), tolerance);
  EXPECT_EQ(ReadSummary(out_ / "ddp")["world_size"], 2);
}

TEST_F(UserModelsCli, TorchScriptWrapperSharesTensorsAndTrainingModeWithTheScriptModule) {
  // forward adds 1 in training mode, so the mode the script module is in shows in its output.
  const std::string path = SaveScript("mode.pt", R"(
import sys, torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    def forward(self, x):
        return self.body(x) + (1.0 if self.training else 0.0)
torch.jit.script(Net()).save(sys.argv[1])
)");
  TorchScriptClassifier model(path, "torchscript:" + path);
  const auto names = model.named_parameters().keys();
  EXPECT_EQ(names, (std::vector<std::string>{"body.1.weight", "body.1.bias"}));
  const torch::Tensor x = torch::ones({2, 1, 2, 2});
  model.train();
  const torch::Tensor training = model.forward(x);
  model.eval();
  const torch::Tensor evaluating = model.forward(x);
  EXPECT_TRUE(torch::allclose(training - evaluating, torch::ones({2, 3})));
  // An in-place change to the wrapper's parameter is what the script module computes with.
  torch::NoGradGuard no_grad;
  model.named_parameters()["body.1.bias"].add_(2.0);
  EXPECT_TRUE(torch::allclose(model.forward(x) - evaluating, torch::full({2, 3}, 2.0)));
}

TEST_F(UserModelsCli, ExamplePluginTrainsInSingleAndDpModes) {
  WriteData();
  const std::string model = std::string("plugin:") + MGPU_EXAMPLE_PLUGIN + ":tiny_cnn";
  const CommandResult single = Train(model, "single", {"--max-steps", "20", "--batch-size", "32"});
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const nlohmann::json summary = ReadSummary(out_ / "single");
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_GT(summary["test_accuracy"].get<double>(), 30.0) << "chance is 10%";
  EXPECT_EQ(summary["state_dict_file"], "model_state_dict.pt");
  // Each replica comes from another call of the factory.
  const CommandResult dp =
      Train(model, "dp", {"--max-steps", "4", "--batch-size", "32", "--mode", "dp", "--dp-devices", "cpu,cpu"});
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  const auto state = LoadStateDict(out_ / "dp/model_state_dict.pt");
  std::vector<std::string> keys;
  for (const auto& item : state) keys.push_back(item.key().toStringRef());
  EXPECT_EQ(keys, (std::vector<std::string>{"conv.weight", "conv.bias", "fc.weight", "fc.bias"}));
}

// Under o2 the model holds float16 weights and the optimizer their float32 masters: the export
// has the masters, which float16 cannot represent exactly.
TEST_F(UserModelsCli, O2ExportsTheFloat32MasterWeights) {
  WriteData();
  const CommandResult run = Train("lenet", "o2", {"--max-steps", "3", "--batch-size", "32", "--precision", "o2",
                                                  "--loss-scale", "dynamic"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  bool beyond_float16 = false;
  for (const auto& item : LoadStateDict(out_ / "o2/model_state_dict.pt")) {
    const torch::Tensor value = item.value().toTensor();
    EXPECT_EQ(value.scalar_type(), torch::kFloat) << item.key().toStringRef();
    beyond_float16 = beyond_float16 || value.to(torch::kHalf).to(torch::kFloat).ne(value).any().item<bool>();
  }
  EXPECT_TRUE(beyond_float16);
}

// The test set as mgpu's evaluation sees it (normalized float32 images), saved for Python.
void SaveEvaluationInputs(const std::string& data_dir, const std::string& path) {
  const TrainTestSplit data = LoadDataset("fashion-mnist", data_dir, DatasetOptions{});
  const Augmentation augmentation(AugmentOptions{});
  BatchLoader loader(data.test, LoaderOptions{data.test.size(), 0, 2, false, augmentation.ForEvaluation()});
  std::vector<int64_t> order(static_cast<size_t>(data.test.size()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  loader.StartEpoch(std::move(order));
  const std::optional<Batch> batch = loader.Next();
  ASSERT_TRUE(batch.has_value());
  c10::Dict<std::string, torch::Tensor> inputs;
  inputs.insert("images", batch->images.contiguous());
  inputs.insert("labels", batch->labels.contiguous());
  WriteBytes(path, SerializeTensorDict(inputs));
}

struct ExportCase {
  std::string model;
  int side;  // the smallest the architecture takes (models/*.h)
};

void PrintTo(const ExportCase& c, std::ostream* os) { *os << c.model << " on " << c.side << "x" << c.side; }

class StateDictExport : public UserModelsCli, public ::testing::WithParamInterface<ExportCase> {};

// Both evaluate the same float32 inputs with the same weights on the same torch build, but
// mgpu's LibTorch and Python may pick other convolution algorithms and thread splits, whose
// float32 sums round differently: a test image whose two largest logits are within that rounding
// of each other can flip. With a few dozen images and an untrained-ish model that is at most one.
TEST_P(StateDictExport, LoadsIntoTorchvisionArchitectureAndReproducesTheTestAccuracy) {
  const ExportCase& c = GetParam();
  constexpr int kTestImages = 40;
  WriteTinyMnistLike(mnist_.path(), 32, kTestImages, c.side);
  const CommandResult run = Train(c.model, c.model, {"--max-steps", "2", "--batch-size", "16", "--eval-batch-size",
                                                      std::to_string(kTestImages)});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json summary = ReadSummary(out_ / c.model);
  ASSERT_EQ(summary["state_dict_file"], "model_state_dict.pt");
  const std::string inputs = out_ / "test_set.pt";
  SaveEvaluationInputs(mnist_.path(), inputs);

  const CommandResult loaded = RunCommand(
      {MGPU_TORCH_PYTHON, std::string(MGPU_SOURCE_DIR) + "/tests/integration/torchvision_state_dict.py", c.model,
       out_ / (c.model + "/model_state_dict.pt"), inputs, "1", "10", std::to_string(c.side)});
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  const nlohmann::json result = nlohmann::json::parse(loaded.output);
  EXPECT_EQ(result["total"], kTestImages);
  const double mgpu_correct = summary["test_accuracy"].get<double>() * kTestImages / 100.0;
  EXPECT_NEAR(result["correct"].get<double>(), mgpu_correct, 1.0) << loaded.output;
  // torchvision's names, batch norm's counters included.
  const auto& keys = result["keys"];
  const std::string counter = c.model == "alexnet" ? "" : c.model == "vgg11" ? "features.1.num_batches_tracked"
                                                                              : "bn1.num_batches_tracked";
  if (!counter.empty()) {
    EXPECT_TRUE(std::find(keys.begin(), keys.end(), counter) != keys.end()) << keys.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, StateDictExport,
                         ::testing::Values(ExportCase{"resnet18", 28}, ExportCase{"vgg11", 32},
                                           ExportCase{"alexnet", 63}),
                         [](const auto& info) { return info.param.model; });

// Every way a user's model can be wrong: exit code 2 before training, and the message's parts.
TEST_F(UserModelsCli, BadUserModelsExitWithCode2AndSayHowToFixThem) {
  WriteTinyMnistLike(mnist_.path(), 16, 8);
  const std::string not_archive = models_ / "notes.pt";
  WriteBytes(not_archive, "not a zip file");
  const std::string no_parameters = SaveScript("empty.pt", R"(
import sys, torch
class Net(torch.nn.Module):
    def forward(self, x):
        return torch.flatten(x, 1)[:, :10]
torch.jit.script(Net()).save(sys.argv[1])
)");
  const std::string wrong_input = SaveScript("wrong_input.pt", R"(
import sys, torch
torch.jit.script(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(100, 10))).save(sys.argv[1])
)");
  const std::string wrong_output = SaveScript("wrong_output.pt", R"(
import sys, torch
torch.jit.script(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 7))).save(sys.argv[1])
)");
  const std::string plugin = MGPU_EXAMPLE_PLUGIN;
  const std::string missing = models_ / "missing.pt";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"torchscript:" + missing, {missing, "cannot open", "torch.jit.script"}},
      {"torchscript:" + not_archive, {not_archive, "is not a TorchScript archive", "torch.jit.script"}},
      {"torchscript:" + no_parameters, {no_parameters, "has no parameters"}},
      {"torchscript:" + wrong_input, {"forward failed on a (2, 1, 28, 28) batch", "(2, 10)", "mat1 and mat2"}},
      {"torchscript:" + wrong_output, {"(2, 7)", "10 classes", "(2, 10)"}},
      {"plugin:" + plugin + ":wrong_classes", {"(2, 11)", "10 classes"}},
      {"plugin:" + plugin + ":nope", {plugin, "mgpu_model_nope", "failing, tiny_cnn, wrong_classes"}},
      {"plugin:" + plugin + ":failing", {"mgpu_model_failing", "refuses on purpose"}},
      {"plugin:" + (models_ / "missing.so") + ":tiny_cnn", {models_ / "missing.so", "cannot load the plugin"}},
      {std::string("plugin:") + MGPU_FOREIGN_PLUGIN + ":tiny_cnn", {"LibTorch 1.13.1", "rebuild the plugin"}},
      {"plugin:" + plugin, {"plugin:LIB.so:NAME"}},
  };
  for (const auto& [model, parts] : cases) {
    const CommandResult result = Train(model, "bad", {"--max-steps", "1", "--overwrite"});  // one folder for every case
    EXPECT_EQ(result.exit_code, 2) << result.output;
    EXPECT_NE(result.output.find("--model " + model), std::string::npos) << result.output;
    for (const std::string& part : parts) EXPECT_NE(result.output.find(part), std::string::npos) << part << "\n" << result.output;
  }
}

}  // namespace
}  // namespace mgpu
