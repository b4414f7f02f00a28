#include "data/tar_index.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/read_only_file.h"
#include "common/status.h"

namespace mgpu {
namespace {

constexpr int64_t kBlock = 512;

// Header fields: (offset, length) within the 512-byte block.
constexpr int kNameAt = 0, kNameLength = 100;
constexpr int kSizeAt = 124, kSizeLength = 12;
constexpr int kChecksumAt = 148, kChecksumLength = 8;
constexpr int kTypeAt = 156;
constexpr int kMagicAt = 257;
constexpr int kPrefixAt = 345, kPrefixLength = 155;

std::string Field(const uint8_t* header, int at, int length) {
  const char* begin = reinterpret_cast<const char*>(header + at);
  return std::string(begin, strnlen(begin, static_cast<size_t>(length)));
}

// Octal digits, optionally surrounded by spaces or NULs; -1 when there are none or another
// character appears. GNU tar writes sizes of 8 GiB and more in base 256, flagged by the top bit.
int64_t Number(const uint8_t* header, int at, int length) {
  if (header[at] & 0x80) {
    int64_t value = header[at] & 0x7f;
    for (int i = 1; i < length; ++i) value = (value << 8) | header[at + i];
    return value;
  }
  int64_t value = 0;
  bool digits = false;
  for (int i = 0; i < length; ++i) {
    const uint8_t c = header[at + i];
    if (c >= '0' && c <= '7') {
      value = value * 8 + (c - '0');
      digits = true;
    } else if (c == ' ' || c == 0) {
      if (digits) break;
    } else {
      return -1;
    }
  }
  return digits ? value : -1;
}

// The checksum is the sum of the header's bytes with its own field counted as spaces; some
// old writers summed signed chars, which tar readers also accept.
bool ChecksumMatches(const uint8_t* header) {
  const int64_t stored = Number(header, kChecksumAt, kChecksumLength);
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (int i = 0; i < kBlock; ++i) {
    const bool in_field = i >= kChecksumAt && i < kChecksumAt + kChecksumLength;
    unsigned_sum += in_field ? ' ' : header[i];
    signed_sum += in_field ? ' ' : static_cast<int8_t>(header[i]);
  }
  return stored == unsigned_sum || stored == signed_sum;
}

// The path= record of a pax extended header ("<length> path=<value>\n" records); "" if none.
std::string PaxPath(const std::string& records) {
  size_t at = 0;
  while (at < records.size()) {
    const size_t space = records.find(' ', at);
    if (space == std::string::npos) break;
    const size_t length = std::strtoull(records.c_str() + at, nullptr, 10);
    if (length == 0 || at + length > records.size()) break;
    const std::string record = records.substr(space + 1, at + length - space - 2);  // without "\n"
    if (record.rfind("path=", 0) == 0) return record.substr(5);
    at += length;
  }
  return "";
}

}  // namespace

std::vector<TarMember> ReadTarIndex(const std::string& path) {
  const ReadOnlyFile file(path);
  const int64_t file_size = file.Size();
  std::vector<TarMember> members;
  std::string long_name;  // from a GNU 'L' or pax 'x' entry, for the next member
  uint8_t header[kBlock];
  for (int64_t offset = 0; offset < file_size;) {
    const int64_t got = file.ReadAt(offset, header, kBlock);
    if (got < kBlock) {
      throw BadInputError(fmt::format("{}: truncated tar: the header at byte {} is cut short ({} of 512 bytes); "
                                      "the file is incomplete, copy or create it again", path, offset, got));
    }
    bool zero = true;
    for (const uint8_t byte : header) zero = zero && byte == 0;
    if (zero) break;  // the end-of-archive blocks
    if (!ChecksumMatches(header)) {
      throw BadInputError(fmt::format("{}: corrupt tar header at byte {} (checksum mismatch): the file is not a "
                                      "tar archive or is damaged; create it again, e.g. with `tar -cf`",
                                      path, offset));
    }
    const int64_t size = Number(header, kSizeAt, kSizeLength);
    if (size < 0) {
      throw BadInputError(fmt::format("{}: corrupt tar header at byte {} (the size field is not a number); "
                                      "create the archive again", path, offset));
    }
    const int64_t data = offset + kBlock;
    if (data + size > file_size) {
      throw BadInputError(fmt::format("{}: truncated tar: the entry at byte {} holds {} bytes but the file ends "
                                      "at byte {}; the file is incomplete, copy or create it again",
                                      path, offset, size, file_size));
    }
    const char type = static_cast<char>(header[kTypeAt]);
    if (type == 'L' || type == 'x') {
      std::string content(static_cast<size_t>(size), '\0');
      file.ReadAt(data, content.data(), size);
      long_name = type == 'L' ? std::string(content.c_str()) : PaxPath(content);
    } else if (type == '0' || type == '\0' || type == '7') {
      std::string name = long_name;
      if (name.empty()) {
        name = Field(header, kNameAt, kNameLength);
        // POSIX ustar keeps the leading directories of long paths in the prefix field (GNU tar's
        // "ustar  " magic uses that space for other things).
        if (std::memcmp(header + kMagicAt, "ustar\0", 6) == 0) {
          const std::string prefix = Field(header, kPrefixAt, kPrefixLength);
          if (!prefix.empty()) name = prefix + "/" + name;
        }
      }
      members.push_back(TarMember{std::move(name), data, size});
      long_name.clear();
    } else if (type != 'g') {
      long_name.clear();  // a directory, link or device: nothing to read
    }
    offset = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  return members;
}

}  // namespace mgpu
