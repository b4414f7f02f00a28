#include "data/tar_index.h"

#include <cstring>
#include <limits>

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

// A numeric field: octal digits, optionally surrounded by spaces or NULs, or GNU tar's base 256
// (sizes of 8 GiB and more; the top bit of the first byte set, 0xff for a negative number).
// "" when `value` was read, else what is wrong with the field ("too large ...").
std::string ReadNumber(const uint8_t* header, int at, int length, int64_t& value) {
  constexpr const char* kTooLarge = "too large (a base-256 number of 2^63 or more)";
  value = 0;
  if (header[at] & 0x80) {
    if (header[at] == 0xff) return "negative (base 256)";
    if (header[at] != 0x80) return kTooLarge;
    for (int i = 1; i < length; ++i) {
      if (value > (std::numeric_limits<int64_t>::max() >> 8)) return kTooLarge;
      value = (value << 8) | header[at + i];
    }
    return "";
  }
  bool digits = false;
  for (int i = 0; i < length; ++i) {
    const uint8_t c = header[at + i];
    if (c >= '0' && c <= '7') {
      value = value * 8 + (c - '0');  // at most 12 digits: below 2^36
      digits = true;
    } else if (c == ' ' || c == 0) {
      if (digits) break;
    } else {
      return "not a number";
    }
  }
  return digits ? "" : "not a number";
}

// The checksum is the sum of the header's bytes with its own field counted as spaces; some
// old writers summed signed chars, which tar readers also accept.
bool ChecksumMatches(const uint8_t* header) {
  int64_t stored = 0;
  if (!ReadNumber(header, kChecksumAt, kChecksumLength, stored).empty()) return false;
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (int i = 0; i < kBlock; ++i) {
    const bool in_field = i >= kChecksumAt && i < kChecksumAt + kChecksumLength;
    unsigned_sum += in_field ? ' ' : header[i];
    signed_sum += in_field ? ' ' : static_cast<int8_t>(header[i]);
  }
  return stored == unsigned_sum || stored == signed_sum;
}

// The path= record of a pax extended header ("<length> path=<value>\n" records, <length>
// counting the whole record); "" if none, or at the first malformed record.
std::string PaxPath(const std::string& records) {
  size_t at = 0;
  while (at < records.size()) {
    size_t length = 0, digit = at;
    for (; digit < records.size() && records[digit] >= '0' && records[digit] <= '9'; ++digit) {
      if (length > records.size()) return "";  // longer than all the records: malformed
      length = length * 10 + static_cast<size_t>(records[digit] - '0');
    }
    // The length's digits, a space, at least one byte and a newline, all inside the records.
    if (digit == at || digit >= records.size() || records[digit] != ' ' || length > records.size() - at ||
        at + length < digit + 2 || records[at + length - 1] != '\n') {
      return "";
    }
    const std::string record = records.substr(digit + 1, at + length - 1 - (digit + 1));
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
    const std::string member = long_name.empty() ? Field(header, kNameAt, kNameLength) : long_name;
    int64_t size = 0;
    if (const std::string problem = ReadNumber(header, kSizeAt, kSizeLength, size); !problem.empty()) {
      throw BadInputError(fmt::format("{}: corrupt tar header at byte {} for member '{}': size field {}; "
                                      "create the archive again", path, offset, member, problem));
    }
    const int64_t data = offset + kBlock;
    if (size > file_size - data) {
      throw BadInputError(fmt::format("{}: truncated tar: the entry '{}' at byte {} holds {} bytes but the file ends "
                                      "at byte {}; the file is incomplete, copy or create it again",
                                      path, member, offset, size, file_size));
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
