// The plain-line progress display of rank 0.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "worker/progress.h"

namespace mgpu {
namespace {

class ProgressLines : public ::testing::Test {
 protected:
  std::ostringstream text_;
  spdlog::logger log_{"progress-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)};
};

// Metrics rows complete a row late on a GPU: until the first one has, there is no loss to show,
// which reads "-", not "nan" (a diverged loss would).
TEST_F(ProgressLines, ShowADashUntilTheFirstLossIsKnown) {
  Progress progress("lines", /*rank=*/0, log_);
  progress.StartEpoch(0, 1, 20);
  progress.Update(2, std::nullopt, 100);
  progress.Update(4, 0.5, 100);
  progress.Update(6, std::numeric_limits<double>::quiet_NaN(), 100);
  const std::string lines = text_.str();
  EXPECT_NE(lines.find("epoch 1/1 step 2/20 loss - 100 img/s"), std::string::npos) << lines;
  EXPECT_NE(lines.find("step 4/20 loss 0.5000 100 img/s"), std::string::npos) << lines;
  EXPECT_NE(lines.find("step 6/20 loss nan 100 img/s"), std::string::npos) << lines;
}

TEST_F(ProgressLines, OnlyRankZeroShowsProgress) {
  Progress progress("lines", /*rank=*/1, log_);
  progress.StartEpoch(0, 1, 20);
  progress.Update(2, 0.5, 100);
  EXPECT_EQ(text_.str(), "");
}

}  // namespace
}  // namespace mgpu
