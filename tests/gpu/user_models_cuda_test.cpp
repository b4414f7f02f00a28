// The user's own models on a GPU: a TorchScript module trains under amp-bf16 autocast (its own
// ops run in bfloat16, which a buffer of the module records) and as a captured CUDA graph, fp32
// and amp-bf16, like its eager steps; the example plugin does both too. Skipped, saying so,
// without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

// A CNN with batch norm whose `autocast_seen` buffer says whether its last forward ran its
// convolution in bfloat16, i.e. whether mgpu's autocast reached the script module's ops.
constexpr char kScriptCnn[] = R"(
import sys, torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 14 * 14, 10)
        self.register_buffer("autocast_seen", torch.zeros(()))
    def forward(self, x):
        h = self.conv(x)
        self.autocast_seen.fill_(1.0 if h.dtype == torch.bfloat16 else 0.0)
        h = torch.max_pool2d(torch.relu(self.bn(h)), 2)
        return self.fc(torch.flatten(h, 1))
torch.manual_seed(0)
torch.jit.script(Net()).save(sys.argv[1])
)";

class UserModelsCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    ASSERT_TRUE(std::string(MGPU_TORCH_PYTHON) != "" && PathExists(MGPU_TORCH_PYTHON))
        << "the Python with LibTorch's torch is missing: run `make deps`, then build again";
    // 650 training images in batches of 64: 10 full batches and a partial one per epoch.
    WriteTinyMnistLike(dir_ / "data", 650, 200);
    // A file, not `python -c`: torch.jit.script reads the source of the classes it compiles.
    WriteBytes(dir_ / "save.py", kScriptCnn);
    const CommandResult saved = RunCommand({MGPU_TORCH_PYTHON, dir_ / "save.py", dir_ / "cnn.pt"});
    ASSERT_EQ(saved.exit_code, 0) << saved.output;
  }

  nlohmann::json Train(const std::string& model, const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN, "--model", model, "--data-dir", dir_ / "data", "--device",
                                     "cuda", "--batch-size", "64", "--epochs", "2", "--seed", "9", "--lr", "0.003",
                                     "--out", dir_ / name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    CommandResult result = RunCommand(argv);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return nlohmann::json::parse(ReadText(dir_ / (name + "/summary.json")));
  }

  // The exported autocast_seen buffer of run `name`.
  double AutocastSeen(const std::string& name) {
    const std::string bytes = ReadFile(dir_ / (name + "/model_state_dict.pt"));
    const auto state = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
    return state.at("autocast_seen").toTensor().item<double>();
  }

  std::string script_model() { return "torchscript:" + (dir_ / "cnn.pt"); }

  TempDir dir_;
};

TEST_F(UserModelsCuda, TorchScriptModelRunsUnderAmpBf16Autocast) {
  const auto fp32 = Train(script_model(), "fp32", {});
  const auto bf16 = Train(script_model(), "bf16", {"--precision", "amp-bf16"});
  EXPECT_EQ(bf16["status"], "ok");
  EXPECT_GT(bf16["test_accuracy"].get<double>(), 30.0) << "chance is 10%";
  EXPECT_NEAR(bf16["test_accuracy"].get<double>(), fp32["test_accuracy"].get<double>(), 10.0);
  EXPECT_EQ(AutocastSeen("fp32"), 0.0);
  EXPECT_EQ(AutocastSeen("bf16"), 1.0);
}

// The graphed step replays the script module's kernels: the same trajectory as its eager steps,
// up to the GPU's non-deterministic summation order (cuda_graphs_test's bounds).
TEST_F(UserModelsCuda, TorchScriptAndPluginStepsAreCapturedAsCudaGraphs) {
  const std::string plugin = std::string("plugin:") + MGPU_EXAMPLE_PLUGIN + ":tiny_cnn";
  for (const std::string& model : {script_model(), plugin}) {
    for (const std::string precision : {"fp32", "amp-bf16"}) {
      const std::string label = (model == plugin ? "plugin-" : "script-") + precision;
      const auto eager = Train(model, "eager-" + label, {"--precision", precision});
      const auto graphed = Train(model, "graphed-" + label, {"--precision", precision, "--cuda-graphs", "true"});
      ASSERT_TRUE(graphed.contains("cuda_graphs")) << label;
      EXPECT_TRUE(graphed["cuda_graphs"]["captured"].get<bool>()) << label;
      EXPECT_GT(graphed["cuda_graphs"]["replays"].get<int64_t>(), 0) << label;
      const double expected = eager["param_checksum"];
      EXPECT_NEAR(graphed["param_checksum"].get<double>(), expected, 1e-3 * expected) << label;
      EXPECT_NEAR(graphed["test_accuracy"].get<double>(), eager["test_accuracy"].get<double>(), 2.0) << label;
      if (model != plugin) {
        EXPECT_EQ(AutocastSeen("graphed-" + label), precision == "amp-bf16" ? 1.0 : 0.0) << label;
      }
    }
  }
}

}  // namespace
}  // namespace mgpu
