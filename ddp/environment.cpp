#include "ddp/environment.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::optional<int> ReadEnvInt(const EnvLookup& env, const char* name, const char* set_by) {
  const char* value = env(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || parsed < 0 || parsed > 1'000'000) {
    throw BadInputError(fmt::format(
        "environment variable {}='{}' is not a non-negative integer (it is normally set by {}); "
        "unset it or fix its value",
        name, value, set_by));
  }
  return static_cast<int>(parsed);
}

bool EnvIsSet(const EnvLookup& env, const char* name) {
  const char* value = env(name);
  return value != nullptr && *value != '\0';
}

}  // namespace mgpu
