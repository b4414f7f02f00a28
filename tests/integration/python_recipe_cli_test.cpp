// A run folder is enough to use the trained model in Python: summary.json's "input" recipe turns
// the raw test files into the model's inputs, and model_state_dict.pt loads into torchvision's
// architecture, giving the run's test accuracy back (docs/GUIDE.md, "Using the trained model in
// Python").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(PythonRecipeCli, SummaryNamesTheInputRecipeThatReproducesTheTestAccuracyInPython) {
  constexpr int kTestImages = 40;
  TempDir data;
  TempDir out;
  WriteTinyMnistLike(data.path(), 64, kTestImages, 28);
  const CommandResult run =
      RunCommand({MGPU_WORKER_BIN, "--data-dir", data.path(), "--device", "cpu", "--threads", "1", "--model",
                  "resnet18", "--max-steps", "3", "--batch-size", "16", "--out", out / "run"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json summary = nlohmann::json::parse(ReadText(out / "run/summary.json"));
  ASSERT_TRUE(summary.contains("input")) << summary.dump(2);
  const nlohmann::json& input = summary["input"];
  EXPECT_EQ(input["channels"], 1);
  EXPECT_EQ(input["channel_order"], "grayscale");
  EXPECT_EQ(input["height"], 28);
  EXPECT_EQ(input["scale"], "uint8 / 255");
  EXPECT_EQ(input["mean"].size(), 1u);
  EXPECT_EQ(input["std"].size(), 1u);

  const CommandResult python = RunCommand(
      {MGPU_TORCH_PYTHON, std::string(MGPU_SOURCE_DIR) + "/tests/integration/python_input_recipe.py", out / "run",
       data / "t10k-images-idx3-ubyte.gz", data / "t10k-labels-idx1-ubyte.gz"});
  ASSERT_EQ(python.exit_code, 0) << python.output;
  const nlohmann::json result = nlohmann::json::parse(python.output);
  EXPECT_EQ(result["total"], kTestImages);
  // The same float32 inputs and weights; LibTorch and Python may round convolution sums in
  // another order, which can flip at most an image whose two top logits are that close.
  const double mgpu_correct = summary["test_accuracy"].get<double>() * kTestImages / 100.0;
  EXPECT_NEAR(result["correct"].get<double>(), mgpu_correct, 1.0) << python.output;
}

}  // namespace
}  // namespace mgpu
