// What every fuzz target shares: the input as a file (for parsers whose entry point takes a
// path, as users' files reach them), and the rule a parser must keep, that hostile bytes end in
// an mgpu::Error (bad input, or out of memory naming the file) and nothing else: any other
// exception escapes the target, and libFuzzer reports it as a crash.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/status.h"

namespace mgpu::fuzz {

// Writes the input to a file of this process's own (under TMPDIR, else /tmp) and returns its
// path; `name` is its file name (some readers look at the extension). The same path each time.
inline std::string WriteInputFile(const uint8_t* data, size_t size, const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/mgpu-fuzz-" +
                           std::to_string(getpid()) + "-" + name;
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0) {
    std::perror(path.c_str());
    std::abort();  // the machine, not the parser: stop the run
  }
  return path;
}

// Runs `parse`; an mgpu::Error is the expected answer to a bad input.
template <typename Parse>
void ExpectParsedOrRefused(Parse&& parse) {
  try {
    parse();
  } catch (const Error&) {
  }
}

}  // namespace mgpu::fuzz
