#include "data/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "data/out_of_memory.h"

namespace mgpu {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr int64_t kMaxElements = int64_t{1} << 34;  // 16 GiB: far above any IDX data set
// Deflate expands data at most about 1032 times (a gzip of zeros), so a .gz file of C bytes
// holds at most this many times C data bytes; a header declaring more is corrupt.
constexpr int64_t kMaxGzipExpansion = 1100;
// The data are read in steps that grow with what arrived, so memory follows the data present,
// not what a corrupt header declares.
constexpr int64_t kFirstReadBytes = int64_t{1} << 20;
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

// `elements` data bytes, or fewer if the file ends first, read in steps that at most double
// what is held.
std::vector<uint8_t> ReadData(gzFile file, const std::string& path, int64_t elements) {
  std::vector<uint8_t> data;
  size_t held = 0;
  while (static_cast<int64_t>(held) < elements) {
    const auto step = static_cast<size_t>(std::min(elements - static_cast<int64_t>(held),
                                                   std::max<int64_t>(static_cast<int64_t>(held), kFirstReadBytes)));
    data.resize(held + step);
    const size_t got = ReadSome(file, path, data.data() + held, step);
    held += got;
    if (got < step) break;
  }
  data.resize(held);
  return data;
}

// Whether the header's declared data fit what the file can hold, before any of it is read: a
// raw file must hold exactly that many bytes after the header; a .gz file cannot expand beyond
// deflate's limit.
void CheckDeclaredSize(gzFile file, const std::string& path, int64_t file_size, const IdxArray& array,
                       int64_t elements) {
  const auto header = static_cast<int64_t>(4 + 4 * array.dims.size());
  if (gzdirect(file) == 1) {
    const int64_t held = file_size - header;
    if (held < elements) {
      throw BadInputError(fmt::format("{}: truncated: the header declares {} = {} data bytes but the file holds {} "
                                      "after its {}-byte header ({} bytes in all); {}",
                                      path, fmt::join(array.dims, "x"), elements, held, header, file_size, kFix));
    }
    if (held > elements) {
      throw BadInputError(fmt::format("{}: {} bytes after the {} data bytes the header declares ({}); the file is "
                                      "corrupt or not an IDX file; {}",
                                      path, held - elements, elements, fmt::join(array.dims, "x"), kFix));
    }
  } else if (elements / kMaxGzipExpansion > file_size) {
    throw BadInputError(fmt::format("{}: truncated: the header declares {} = {} data bytes but the compressed file "
                                    "has {} bytes, which gzip cannot expand to more than about {} times (the file is "
                                    "cut short, or its header is corrupt); {}",
                                    path, fmt::join(array.dims, "x"), elements, file_size, kMaxGzipExpansion, kFix));
  }
}

IdxArray ReadIdx(const std::string& path, int expected_rank) {
  if (!IsRegularFile(path)) {
    throw BadInputError(fmt::format("{}: file not found; expected an IDX file (raw or .gz). {}",
                                    path, kFix));
  }
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    throw BadInputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  const int64_t file_size = FileSize(path);
  if (file_size < 0) throw BadInputError(fmt::format("{}: cannot read its size: {}", path, std::strerror(errno)));
  // Up to 1 MiB at a time, less for a small file (zlib allocates three times this).
  gzbuffer(file.get(), static_cast<unsigned>(std::clamp<int64_t>(file_size, 8 << 10, 1 << 20)));

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
    if (dim > kMaxElements / elements) {  // elements * dim > kMaxElements, without overflowing
      throw BadInputError(fmt::format("{}: header declares more than {} elements; the header is "
                                      "corrupt; {}",
                                      path, kMaxElements, kFix));
    }
    elements *= dim;
    array.dims.push_back(dim);
  }

  CheckDeclaredSize(file.get(), path, file_size, array, elements);
  array.data = ReadData(file.get(), path, elements);
  const size_t got = array.data.size();
  if (static_cast<int64_t>(got) < elements) {
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

}  // namespace

IdxArray ReadIdxFile(const std::string& path, int expected_rank) {
  return NameFileOnOutOfMemory(path, [&] { return ReadIdx(path, expected_rank); });
}

}  // namespace mgpu
