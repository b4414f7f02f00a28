// Specification of how many CUDA work queues a worker asks for (worker/cuda_work_queues.h): the
// driver's maximum where JPEGs may be decoded on the GPU, unless the environment already says,
// and nothing otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "tests/support/fake_environment.h"
#include "worker/cuda_work_queues.h"

namespace mgpu {
namespace {

using mgpu::testing::FakeEnv;

TEST(CudaWorkQueues, ARunThatMayDecodeOnTheGpuAsksForTheDriversMaximum) {
  const WorkQueuesChoice choice = ChooseWorkQueues(/*may_decode_on_gpu=*/true, FakeEnv({}));
  EXPECT_EQ(choice.set_to, std::optional<int>(32));
  EXPECT_NE(choice.note.find("CUDA work queues: 32"), std::string::npos) << choice.note;
  EXPECT_NE(choice.note.find("CUDA_DEVICE_MAX_CONNECTIONS"), std::string::npos) << choice.note;
}

TEST(CudaWorkQueues, TheEnvironmentsValueIsKeptAndNamedInTheLog) {
  const WorkQueuesChoice choice =
      ChooseWorkQueues(/*may_decode_on_gpu=*/true, FakeEnv({{"CUDA_DEVICE_MAX_CONNECTIONS", "8"}}));
  EXPECT_EQ(choice.set_to, std::nullopt);
  EXPECT_NE(choice.note.find("CUDA_DEVICE_MAX_CONNECTIONS=8 from the environment"), std::string::npos) << choice.note;
}

TEST(CudaWorkQueues, AnEmptyValueCountsAsUnset) {
  const WorkQueuesChoice choice =
      ChooseWorkQueues(/*may_decode_on_gpu=*/true, FakeEnv({{"CUDA_DEVICE_MAX_CONNECTIONS", ""}}));
  EXPECT_EQ(choice.set_to, std::optional<int>(32));
}

TEST(CudaWorkQueues, ARunThatDecodesOnTheCpuLeavesTheDriversDefaultAndSaysNothing) {
  for (const auto& vars : {std::map<std::string, std::string>{}, {{"CUDA_DEVICE_MAX_CONNECTIONS", "4"}}}) {
    const WorkQueuesChoice choice = ChooseWorkQueues(/*may_decode_on_gpu=*/false, FakeEnv(vars));
    EXPECT_EQ(choice.set_to, std::nullopt);
    EXPECT_EQ(choice.note, "");
  }
}

TEST(CudaWorkQueues, ApplyingAChoiceExportsItsValueAndNothingElse) {
  const char* before = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "5", 1);
  ApplyWorkQueues(WorkQueuesChoice{});
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "5");
  ApplyWorkQueues(WorkQueuesChoice{32, "note"});
  EXPECT_STREQ(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "32");
  if (saved) {
    ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved->c_str(), 1);
  } else {
    ::unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  }
}

}  // namespace
}  // namespace mgpu
