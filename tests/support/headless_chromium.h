// Headless Chromium for tests that look at a page the way a person would: the browser renders it,
// and the test reads the DOM it built, its console, or a screenshot.
//
// Each call runs one browser in a fresh profile under `work_dir`, with a time limit. The calling
// process makes itself the subreaper of everything the browser starts (its zygote, renderers and
// crash handler leave its process group and session), so the call returns only after every one
// of them has exited or been killed: no browser process outlives the call. Browser processes
// still running 10 s after the browser's main process ended are killed and listed in
// `left_behind`.
#pragma once

#include <string>
#include <vector>

namespace mgpu::testing {

struct BrowserResult {
  int exit_code = -1;            // the main process's exit status, or 128 + signal
  bool timed_out = false;        // it ran past the time limit and was killed
  std::string stdout_text;       // e.g. the DOM, with --dump-dom
  std::string stderr_text;       // Chromium's log; page console messages contain ":CONSOLE"
  std::vector<int> left_behind;  // processes it started that had to be killed after it ended
};

// Runs `chromium --headless=new --no-sandbox --disable-gpu --user-data-dir=<work_dir>/profile
// <flags...> <url>`; stdout and stderr go to files in `work_dir` (so no lingering child can hold
// a pipe open). Throws std::runtime_error if it cannot be started.
BrowserResult RunHeadlessChromium(const std::string& chromium, const std::string& work_dir,
                                  const std::vector<std::string>& flags, const std::string& url,
                                  double timeout_seconds = 60);

}  // namespace mgpu::testing
