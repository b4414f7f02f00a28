// --profile-steps FIRST-LAST: which optimizer steps worker/trace_profiler.h profiles.
#pragma once

#include <cstdint>
#include <string>

namespace mgpu {

// The inclusive range of optimizer steps to profile; first == 0 means off.
struct ProfileWindow {
  int64_t first = 0;
  int64_t last = 0;
  bool enabled() const { return first > 0; }
};

// Parses "FIRST-LAST" or "STEP" (1-based optimizer steps, FIRST <= LAST); "" is off. Throws
// BadInputError naming the accepted forms.
ProfileWindow ParseProfileWindow(const std::string& text);
// The flag's text for `window` ("" when off): ParseProfileWindow's inverse.
std::string FormatProfileWindow(const ProfileWindow& window);

}  // namespace mgpu
