// Specification of the tests' fault injection (worker/test_faults.h): read from MGPU_TEST_FAULTS,
// never from the user's options.
#include <cmath>

#include <gtest/gtest.h>

#include "common/status.h"
#include "worker/test_faults.h"
#include "worker/train_config.h"

namespace mgpu {
namespace {

TEST(TestFaults, NoUserOptionIsForTestsOnly) {
  for (const OptionSpec& spec : TrainOptions()) {
    EXPECT_EQ(spec.name.rfind("test-", 0), std::string::npos) << spec.name << " belongs in MGPU_TEST_FAULTS";
    EXPECT_EQ(spec.help.find("test only"), std::string::npos) << spec.name;
  }
  EXPECT_EQ(ConfigToYaml(TrainConfig{}).find("test-"), std::string::npos) << ConfigToYaml(TrainConfig{});
}

TEST(TestFaults, AFailFaultFailsItsStepOnItsRankOnly) {
  const TestFaults faults = TestFaults::Parse("fail-at-step=3,rank=1");
  EXPECT_NO_THROW(faults.AfterBackward(2, 1));
  EXPECT_NO_THROW(faults.AfterBackward(3, 0));
  EXPECT_THROW(faults.AfterBackward(3, 1), Error);
  EXPECT_THROW(TestFaults::Parse("fail-at-step=3").AfterBackward(3, 5), Error) << "no rank: every rank fails";
}

TEST(TestFaults, ANonfiniteFaultPoisonsItsStepsLossInModeSingleOnly) {
  const TestFaults faults = TestFaults::Parse("nonfinite-at-step=2");
  const torch::Tensor loss = torch::tensor(1.5);
  EXPECT_EQ(faults.PoisonLoss(1, loss).item<double>(), 1.5);
  EXPECT_TRUE(std::isnan(faults.PoisonLoss(2, loss).item<double>()));
  TrainConfig config;
  EXPECT_NO_THROW(faults.CheckApplies(config));
  config.mode = Mode::kDp;
  EXPECT_THROW(faults.CheckApplies(config), BadInputError);
}

TEST(TestFaults, UnknownKeysAndBadNumbersNameTheVariableAndTheEntry) {
  EXPECT_NO_THROW(TestFaults::Parse(""));
  for (const char* text : {"hang-at-stpe=3", "fail-at-step=x", "fail-at-step=0", "rank=-2", "hang-at-step"}) {
    try {
      TestFaults::Parse(text);
      FAIL() << text << ": expected BadInputError";
    } catch (const BadInputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("MGPU_TEST_FAULTS"), std::string::npos) << message;
      EXPECT_NE(message.find(text), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace mgpu
