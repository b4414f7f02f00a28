#include "launcher/serve/utf8_text.h"

#include <fmt/format.h>
#include <utf8cpp/utf8.h>

#include "common/status.h"

namespace mgpu {

void RequireUtf8(const std::string& text, const std::string& what) {
  const auto bad = utf8::find_invalid(text.begin(), text.end());
  if (bad == text.end()) return;
  throw BadInputError(fmt::format("{} is not UTF-8 text: byte {} (0x{:02x}) starts no valid character; save it as "
                                  "UTF-8",
                                  what, bad - text.begin(), static_cast<unsigned char>(*bad)));
}

}  // namespace mgpu
