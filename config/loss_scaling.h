// `--loss-scale none | dynamic | <positive number>`, parsed once when the option is set
// (config/train_config.h); amp/grad_scaler.h's GradScaler scales by it.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace mgpu {

struct LossScaling {
  enum class Mode { kNone, kDynamic, kStatic };
  LossScaling() = default;
  LossScaling(Mode mode, double static_scale, std::string spelling = "")
      : mode(mode), static_scale(static_scale), spelling(std::move(spelling)) {}

  Mode mode = Mode::kNone;
  double static_scale = 1.0;  // kStatic only
  // The option's value as given ("65536.0"), which config.yaml, the start-up table and messages
  // repeat; "" for a scaling made in code (LossScalingText then writes it out).
  std::string spelling;
};
// Throws BadInputError naming the accepted values.
LossScaling ParseLossScaling(const std::string& text);
// "none", "dynamic" or "static" (summary.json's loss_scale_mode).
std::string LossScalingModeName(LossScaling::Mode mode);
// The option's text: its spelling, else "none", "dynamic" or the static scale ("1024").
std::string LossScalingText(const LossScaling& scaling);

}  // namespace mgpu

// fmt prints a LossScaling as the option's text (LossScalingText).
template <>
struct fmt::formatter<mgpu::LossScaling> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const mgpu::LossScaling& scaling, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(mgpu::LossScalingText(scaling), ctx);
  }
};
