// An index of the regular files inside a tar archive, built once by reading its 512-byte headers
// (the data is skipped, not read), so that a member can later be read with one pread() at its
// offset; nothing is extracted. Formats: POSIX ustar (name prefix field), GNU (long names in
// 'L' entries, base-256 sizes) and pax ('x' entries' path= records), as GNU tar and Python's
// tarfile write them. Directories, links and other special entries are left out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu {

struct TarMember {
  std::string name;    // the path stored in the archive, e.g. "shard-0/000123.jpg"
  int64_t offset = 0;  // of the member's data, in bytes from the start of the archive
  int64_t size = 0;    // of the data, in bytes
};

// The archive's members in stored order. Throws BadInputError naming `path` and the byte offset
// for a header whose checksum does not match (not a tar, or damaged), a header cut short, or a
// member whose data runs past the end of the file (a truncated archive).
std::vector<TarMember> ReadTarIndex(const std::string& path);

}  // namespace mgpu
