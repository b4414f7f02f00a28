#include "launcher/serve/status_line.h"

namespace mgpu {

std::string StatusLine::Show(const std::string& text) {
  if (!terminal_) return text + "\n";
  open_ = true;
  return "\r" + text + "\x1b[K";  // ESC [ K: erase the rest of a longer previous line
}

std::string StatusLine::Finish() {
  if (!open_) return "";
  open_ = false;
  return "\n";
}

}  // namespace mgpu
