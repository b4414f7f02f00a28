// File-system helpers with the guarantees mgpu's outputs rely on.
#pragma once

#include <string>

namespace mgpu {

// Writes `contents` to `path` atomically: a temporary file in the same folder, fsync, rename.
// A crash leaves either the old file or the new one, never a torn one. Throws mgpu::Error.
void WriteFileAtomically(const std::string& path, const std::string& contents);

// Reads a whole file; throws BadInputError naming the path if it cannot be read.
std::string ReadFile(const std::string& path);

// Creates `path` and its parents; throws mgpu::Error naming the path on failure.
void MakeDirectories(const std::string& path);

// Local time as "YYYYmmdd-HHMMSS", for default run folder names.
std::string TimestampForPath();

// Peak resident set size of this process in bytes (getrusage).
long long PeakRssBytes();

}  // namespace mgpu
