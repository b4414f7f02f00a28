#include "worker/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "common/real.h"

namespace mgpu {
namespace {

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string LossText(std::optional<double> loss) { return loss ? fmt::format("{:.4f}", Real{*loss}) : "-"; }

constexpr int kBarWidth = 30;
constexpr double kRedrawSeconds = 0.1;

}  // namespace

Progress::Progress(const std::string& mode, int rank, spdlog::logger& log)
    : enabled_(rank == 0),
      bar_(mode == "bar" || (mode == "auto" && ::isatty(STDERR_FILENO) == 1)),
      log_(log) {}

void Progress::StartEpoch(int64_t epoch, int64_t epochs, int64_t steps_in_epoch, int64_t first_step) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps_in_epoch;
  first_step_ = first_step;
  const int64_t line_every = std::max<int64_t>((steps_ + 9) / 10, 1);
  next_line_at_ = (first_step / line_every + 1) * line_every;
  started_ = Now();
  last_draw_ = 0;
}

void Progress::Update(int64_t step, std::optional<double> loss, double images_per_second) {
  if (!enabled_) return;
  const double now = Now();
  const double fraction = steps_ > 0 ? static_cast<double>(step) / static_cast<double>(steps_) : 1;
  // From the pace of the steps this process ran.
  const int64_t done = step - first_step_;
  const double eta = done > 0 ? (now - started_) * static_cast<double>(steps_ - step) / static_cast<double>(done) : 0;
  if (bar_) {
    if (now - last_draw_ < kRedrawSeconds && step < steps_) return;
    last_draw_ = now;
    const int filled = static_cast<int>(fraction * kBarWidth);
    std::fprintf(stderr, "\r\033[Kepoch %lld/%lld [%s%s] %lld/%lld loss %s %.0f img/s ETA %.0fs",
                 static_cast<long long>(epoch_ + 1), static_cast<long long>(epochs_),
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kBarWidth - filled), ' ').c_str(),
                 static_cast<long long>(step), static_cast<long long>(steps_), LossText(loss).c_str(),
                 images_per_second, eta);
    std::fflush(stderr);
  } else if (step >= next_line_at_ && step < steps_) {
    next_line_at_ += std::max<int64_t>((steps_ + 9) / 10, 1);
    log_.info("epoch {}/{} step {}/{} loss {} {:.0f} img/s ETA {:.0f}s", epoch_ + 1, epochs_,
              step, steps_, LossText(loss), images_per_second, eta);
  }
}

void Progress::EndEpoch() {
  if (enabled_ && bar_) std::fputs("\r\033[K", stderr);
}

}  // namespace mgpu
