#include "worker/test_faults.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

int64_t ParseFaultNumber(const std::string& entry, const std::string& text, int64_t min_value) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < min_value) {
    throw BadInputError(fmt::format("{}: '{}' needs an integer of at least {}", kTestFaultsVariable, entry, min_value));
  }
  return value;
}

}  // namespace

TestFaults TestFaults::Parse(const std::string& text) {
  TestFaults faults;
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    if (entry.empty()) continue;
    const size_t equals = entry.find('=');
    const std::string key = entry.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : entry.substr(equals + 1);
    if (key == "hang-at-step") {
      faults.hang_at_step_ = ParseFaultNumber(entry, value, 1);
    } else if (key == "fail-at-step") {
      faults.fail_at_step_ = ParseFaultNumber(entry, value, 1);
    } else if (key == "nonfinite-at-step") {
      faults.nonfinite_at_step_ = ParseFaultNumber(entry, value, 1);
    } else if (key == "hang-rank") {
      faults.hang_rank_ = ParseFaultNumber(entry, value, 0);
    } else if (key == "fail-rank") {
      faults.fail_rank_ = ParseFaultNumber(entry, value, 0);
    } else if (key == "rank") {
      faults.hang_rank_ = faults.fail_rank_ = ParseFaultNumber(entry, value, 0);
    } else {
      throw BadInputError(fmt::format("{}: unknown entry '{}'; the keys are hang-at-step, fail-at-step, "
                                      "nonfinite-at-step, hang-rank, fail-rank and rank (worker/test_faults.h)",
                                      kTestFaultsVariable, entry));
    }
  }
  return faults;
}

const TestFaults& TestFaults::FromEnvironment() {
  static const TestFaults faults = [] {
    const char* text = std::getenv(kTestFaultsVariable);
    return Parse(text == nullptr ? "" : text);
  }();
  return faults;
}

void TestFaults::CheckApplies(const TrainConfig& config) const {
  if (nonfinite_at_step_ > 0 && (config.mode != Mode::kSingle || config.cuda_graphs)) {
    throw BadInputError(fmt::format("{} nonfinite-at-step works with --mode single without --cuda-graphs, "
                                    "not with --mode {}{}",
                                    kTestFaultsVariable, config.mode, config.cuda_graphs ? " --cuda-graphs" : ""));
  }
}

torch::Tensor TestFaults::PoisonLoss(int64_t step, const torch::Tensor& loss) const {
  return step == nonfinite_at_step_ ? loss * std::numeric_limits<float>::quiet_NaN() : loss;
}

void TestFaults::AfterBackward(int64_t step, int rank) const {
  if (step == fail_at_step_ && (fail_rank_ < 0 || fail_rank_ == rank)) {
    throw Error(ExitCode::kFailure, fmt::format("step {} failed on purpose ({} fail-at-step)", step, kTestFaultsVariable));
  }
}

void TestFaults::AfterStep(spdlog::logger& log, int64_t step, int rank) const {
  if (step != hang_at_step_ || (hang_rank_ >= 0 && hang_rank_ != rank)) return;
  log.warn("{} hang-at-step {}: this rank now hangs on purpose (a test of the launcher's supervision)",
           kTestFaultsVariable, step);
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace mgpu
