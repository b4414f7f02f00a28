// One status line that `mgpu watch` keeps up to date: on a terminal each new text replaces the
// last in place (carriage return, then the line cleared to its end), elsewhere (a pipe, a file,
// a log) each is a line of its own, so logs keep every state the job went through.
#pragma once

#include <string>

namespace mgpu {

class StatusLine {
 public:
  explicit StatusLine(bool terminal) : terminal_(terminal) {}

  // What to print to show `text` as the current status.
  std::string Show(const std::string& text);
  // What to print once no more updates come: the newline that ends a line kept in place.
  std::string Finish();

 private:
  bool terminal_;
  bool open_ = false;  // a line is shown in place and not yet ended
};

}  // namespace mgpu
