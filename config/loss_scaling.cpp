#include "config/loss_scaling.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/status.h"

namespace mgpu {

LossScaling ParseLossScaling(const std::string& text) {
  if (text == "none") return LossScaling{LossScaling::Mode::kNone, 1.0, text};
  if (text == "dynamic") return LossScaling{LossScaling::Mode::kDynamic, 1.0, text};
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !std::isfinite(value) || value <= 0) {
    throw BadInputError(fmt::format("'{}' is not one of: none, dynamic, or a positive number (a static "
                                    "scale such as 1024)", text));
  }
  return LossScaling{LossScaling::Mode::kStatic, value, text};
}

std::string LossScalingModeName(LossScaling::Mode mode) {
  switch (mode) {
    case LossScaling::Mode::kNone: return "none";
    case LossScaling::Mode::kDynamic: return "dynamic";
    case LossScaling::Mode::kStatic: return "static";
  }
  return "none";
}

std::string LossScalingText(const LossScaling& scaling) {
  if (!scaling.spelling.empty()) return scaling.spelling;
  if (scaling.mode == LossScaling::Mode::kStatic) return fmt::format("{}", scaling.static_scale);
  return LossScalingModeName(scaling.mode);
}

}  // namespace mgpu
