#include "data/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"

namespace mgpu {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr int64_t kMaxElements = int64_t{1} << 34;  // 16 GiB: far above any IDX data set
constexpr const char* kFix =
    "re-install the data set (e.g. `apt-get install --reinstall dataset-fashion-mnist`) or point "
    "--data-dir at a complete copy";

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads up to `size` bytes; returns how many were read. Throws on a zlib/gzip error.
size_t ReadSome(gzFile file, const std::string& path, void* out, size_t size) {
  size_t total = 0;
  auto* bytes = static_cast<uint8_t*>(out);
  while (total < size) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(size - total, 1u << 30));
    const int n = gzread(file, bytes + total, chunk);
    if (n < 0) {
      int zerr = 0;
      const char* text = gzerror(file, &zerr);
      throw BadInputError(fmt::format("{}: corrupt or unreadable compressed data ({}); {}", path,
                                      text ? text : "unknown zlib error", kFix));
    }
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  return total;
}

}  // namespace

IdxArray ReadIdxFile(const std::string& path, int expected_rank) {
  if (!IsRegularFile(path)) {
    throw BadInputError(fmt::format("{}: file not found; expected an IDX file (raw or .gz). {}",
                                    path, kFix));
  }
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    throw BadInputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  gzbuffer(file.get(), 1 << 20);

  uint8_t magic[4] = {0, 0, 0, 0};
  const size_t magic_read = ReadSome(file.get(), path, magic, sizeof(magic));
  if (magic_read < sizeof(magic)) {
    throw BadInputError(fmt::format(
        "{}: truncated: {} bytes where a 4-byte IDX magic number was expected; {}", path,
        magic_read, kFix));
  }
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != kUnsignedByteType ||
      magic[3] != expected_rank) {
    throw BadInputError(fmt::format(
        "{}: wrong magic number {:02x} {:02x} {:02x} {:02x}; expected 00 00 08 {:02x} (an IDX "
        "file of unsigned bytes with {} dimensions). Is this the right file? {}",
        path, magic[0], magic[1], magic[2], magic[3], expected_rank, expected_rank, kFix));
  }

  IdxArray array;
  int64_t elements = 1;
  for (int d = 0; d < expected_rank; ++d) {
    uint8_t be[4];
    if (ReadSome(file.get(), path, be, sizeof(be)) < sizeof(be)) {
      throw BadInputError(fmt::format("{}: truncated in the header (dimension {} of {}); {}",
                                      path, d + 1, expected_rank, kFix));
    }
    const int64_t dim = (int64_t{be[0]} << 24) | (int64_t{be[1]} << 16) | (int64_t{be[2]} << 8) |
                        int64_t{be[3]};
    if (dim == 0) {
      throw BadInputError(fmt::format("{}: dimension {} is 0; an IDX data set must not be empty; {}",
                                      path, d + 1, kFix));
    }
    elements *= dim;
    if (elements > kMaxElements) {
      throw BadInputError(fmt::format("{}: header declares more than {} elements; the header is "
                                      "corrupt; {}",
                                      path, kMaxElements, kFix));
    }
    array.dims.push_back(dim);
  }

  array.data.resize(static_cast<size_t>(elements));
  const size_t got = ReadSome(file.get(), path, array.data.data(), array.data.size());
  if (got < array.data.size()) {
    throw BadInputError(fmt::format(
        "{}: truncated: the header declares {} = {} data bytes but the file holds {}; {}", path,
        fmt::join(array.dims, "x"), elements, got, kFix));
  }
  uint8_t extra[64];
  const size_t trailing = ReadSome(file.get(), path, extra, sizeof(extra));
  if (trailing > 0) {
    throw BadInputError(fmt::format(
        "{}: {}{} bytes after the {} data bytes the header declares ({}); the file is corrupt or "
        "not an IDX file; {}",
        path, trailing == sizeof(extra) ? "at least " : "", trailing, elements,
        fmt::join(array.dims, "x"), kFix));
  }
  return array;
}

}  // namespace mgpu
