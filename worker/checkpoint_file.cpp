#include "worker/checkpoint_file.h"

#include <fmt/format.h>

#include "common/status.h"
#include "report/crc32c.h"

namespace mgpu {
namespace {

constexpr char kMagic[] = "MGPUCKPT";
constexpr size_t kMagicSize = 8;
constexpr size_t kPrefixSize = 32;

void PutLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(const std::string& in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(in[offset + i])) << (8 * i);
  return value;
}

}  // namespace

std::string EncodeCheckpointFile(const CheckpointFileContents& contents) {
  const std::string body = contents.header + contents.payload;
  std::string out(kMagic, kMagicSize);
  PutLittleEndian(out, kCheckpointFormatVersion, 4);
  PutLittleEndian(out, contents.header.size(), 8);
  PutLittleEndian(out, contents.payload.size(), 8);
  PutLittleEndian(out, Crc32c(body.data(), body.size()), 4);
  return out + body;
}

CheckpointFileContents DecodeCheckpointFile(const std::string& bytes, const std::string& path) {
  const auto fail = [&](const std::string& why) {
    return BadInputError(fmt::format("checkpoint {}: {}; pass another checkpoint to --resume (e.g. an earlier "
                                     "step-N.ckpt in the same folder) or start without --resume",
                                     path, why));
  };
  if (bytes.size() >= kMagicSize && bytes.compare(0, kMagicSize, kMagic) != 0) {
    throw fail("not an mgpu checkpoint (it does not start with MGPUCKPT)");
  }
  if (bytes.size() < kPrefixSize) {
    throw fail(fmt::format("truncated: {} bytes, shorter than the {}-byte prefix", bytes.size(), kPrefixSize));
  }
  const uint64_t version = GetLittleEndian(bytes, 8, 4);
  if (version != kCheckpointFormatVersion) {
    throw fail(fmt::format("format version {}, but this mgpu-worker reads version {}", version,
                           kCheckpointFormatVersion));
  }
  const uint64_t header_size = GetLittleEndian(bytes, 12, 8);
  const uint64_t payload_size = GetLittleEndian(bytes, 20, 8);
  const uint64_t body_size = bytes.size() - kPrefixSize;
  if (header_size > body_size || payload_size > body_size - header_size) {
    throw fail(fmt::format("truncated: {} bytes, but its prefix announces {}", bytes.size(),
                           kPrefixSize + header_size + payload_size));
  }
  if (header_size + payload_size != body_size) {
    throw fail(fmt::format("corrupt: {} bytes after the announced end", body_size - header_size - payload_size));
  }
  const uint32_t stored = static_cast<uint32_t>(GetLittleEndian(bytes, 28, 4));
  const uint32_t computed = Crc32c(bytes.data() + kPrefixSize, body_size);
  if (stored != computed) {
    throw fail(fmt::format("corrupt: CRC-32C of the contents is {:08x}, the file records {:08x} (changed after "
                           "it was written)",
                           computed, stored));
  }
  return CheckpointFileContents{bytes.substr(kPrefixSize, header_size), bytes.substr(kPrefixSize + header_size)};
}

}  // namespace mgpu
