// File-system helpers with the guarantees mgpu's outputs rely on.
//
// mgpu uses these (POSIX underneath) instead of std::filesystem: libtorch.so exports its own
// copies of many std::filesystem functions, built against another libstdc++, and depending on
// the order the dynamic linker sees libraries a call can bind to those and crash (seen with
// remove_all on Ubuntu 24.04 and Debian 12).
#pragma once

#include <string>
#include <vector>

namespace mgpu {

// Writes `contents` to `path` atomically: a temporary file in the same folder, fsync, rename.
// A crash leaves either the old file or the new one, never a torn one. Throws mgpu::Error.
void WriteFileAtomically(const std::string& path, const std::string& contents);

// Makes `path` a second name of the file `existing` (a hard link, swapped in by rename, so `path`
// is always whole), so that both names hold one copy on disk; where the file system has no hard
// link between the two (another file system), writes `contents`, which must be `existing`'s
// bytes, with WriteFileAtomically. Returns whether it linked. Throws mgpu::Error.
bool LinkOrWriteAtomically(const std::string& existing, const std::string& path, const std::string& contents);

// Makes the folder's entries (a rename into it) durable: fsync on the folder. Throws mgpu::Error.
void SyncDirectory(const std::string& path);

// Reads a whole file; throws BadInputError naming the path if it cannot be read.
std::string ReadFile(const std::string& path);

// Creates `path` and its parents; throws mgpu::Error naming the path on failure.
void MakeDirectories(const std::string& path);

bool PathExists(const std::string& path);
bool IsRegularFile(const std::string& path);
bool IsDirectory(const std::string& path);
// Size in bytes, or -1 if the file cannot be examined.
long long FileSize(const std::string& path);
// Names of the entries of a folder (not "." or ".."), sorted; empty if it cannot be read.
std::vector<std::string> ListDirectory(const std::string& path);
// Removes a file or an empty folder; returns whether something was removed.
bool RemovePath(const std::string& path);
// Removes a folder and everything below it, without following symbolic links. Best effort.
void RemoveTree(const std::string& path);
// The folder holding the running executable (/proc/self/exe).
std::string ExecutableDirectory();

// Local time as "YYYYmmdd-HHMMSS", for default run folder names.
std::string TimestampForPath();

// Peak resident set size of this process in bytes (getrusage).
long long PeakRssBytes();

}  // namespace mgpu
