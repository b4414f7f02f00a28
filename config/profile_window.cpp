#include "config/profile_window.h"

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

int64_t ParseStep(const std::string& text, const std::string& whole) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || value < 1) {
    throw BadInputError(fmt::format("--profile-steps '{}': expected FIRST-LAST or STEP, optimizer steps from 1 "
                                    "(e.g. 20-22)", whole));
  }
  return value;
}

}  // namespace

ProfileWindow ParseProfileWindow(const std::string& text) {
  if (text.empty()) return {};
  const size_t dash = text.find('-');
  ProfileWindow window;
  window.first = ParseStep(text.substr(0, dash), text);
  window.last = dash == std::string::npos ? window.first : ParseStep(text.substr(dash + 1), text);
  if (window.last < window.first) {
    throw BadInputError(fmt::format("--profile-steps '{}': the last step comes before the first; write FIRST-LAST "
                                    "with FIRST <= LAST", text));
  }
  return window;
}

std::string FormatProfileWindow(const ProfileWindow& window) {
  return window.enabled() ? fmt::format("{}-{}", window.first, window.last) : "";
}

}  // namespace mgpu
