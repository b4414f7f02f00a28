// Allocation failures while reading a user's file name the file. Readers bound what a file can
// make them allocate by its size (a corrupt header is refused before anything is allocated), so
// a std::bad_alloc that still happens means the machine is short of memory for a file of that
// size: an mgpu::Error (exit 1) naming the file, not a bare "std::bad_alloc".
#pragma once

#include <new>
#include <string>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

// Runs `read` and returns what it returns; a std::bad_alloc becomes an Error naming `path`.
template <typename Read>
auto NameFileOnOutOfMemory(const std::string& path, Read&& read) {
  try {
    return read();
  } catch (const std::bad_alloc&) {
    throw Error(ExitCode::kFailure, fmt::format("{}: out of memory while reading it; free memory, or use a machine "
                                                "with more", path));
  }
}

}  // namespace mgpu
