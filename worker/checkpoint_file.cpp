#include "worker/checkpoint_file.h"

#include <algorithm>
#include <vector>

#include <c10/util/bit_cast.h>
#include <fmt/format.h>

#include "common/crc32c.h"
#include "common/status.h"
#include "worker/torch_archive.h"

namespace mgpu {
namespace {

constexpr char kFormat[] = "mgpu-checkpoint";
constexpr const char* kReservedKeys[] = {"format", "format_version", "header", "crc32c"};
constexpr char kVersion1Magic[] = "MGPUCKPT";
constexpr size_t kVersion1MagicSize = 8;
constexpr size_t kVersion1PrefixSize = 32;
constexpr char kZipLocalHeader[] = "PK\x03\x04";
constexpr char kZipEndRecord[] = "PK\x05\x06";
constexpr size_t kZipEndRecordSize = 22;  // without its comment, of at most 65,535 bytes

BadInputError Unreadable(const std::string& path, const std::string& why) {
  return BadInputError(fmt::format("checkpoint {}: {}; pass another checkpoint to --resume (e.g. an earlier "
                                   "step-N.ckpt in the same folder) or start without --resume",
                                   path, why));
}

bool IsReserved(const std::string& key) {
  return std::any_of(std::begin(kReservedKeys), std::end(kReservedKeys), [&](const char* k) { return key == k; });
}

uint64_t GetLittleEndian(const std::string& in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(static_cast<uint8_t>(in[offset + i])) << (8 * i);
  return value;
}

uint32_t ExtendWithNumber(uint32_t crc, uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>((value >> (8 * i)) & 0xff);
  return Crc32cExtend(crc, bytes, sizeof bytes);
}

uint32_t ExtendWithText(uint32_t crc, const std::string& text) { return Crc32cExtend(crc, text.data(), text.size()); }

// A dict's string keys in order; a key of another type is no checkpoint's.
std::vector<std::string> SortedKeys(const c10::impl::GenericDict& dict, const std::string& path) {
  std::vector<std::string> keys;
  for (const auto& entry : dict) {
    if (!entry.key().isString()) throw Unreadable(path, "it holds a dict with a key that is not a string");
    keys.push_back(entry.key().toStringRef());
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

uint32_t ExtendWithValue(uint32_t crc, const c10::IValue& value, const std::string& path) {
  if (value.isNone()) return crc;
  if (value.isTensor()) {
    const at::Tensor tensor = value.toTensor().contiguous();
    crc = ExtendWithText(crc, c10::toString(tensor.scalar_type()));
    for (const int64_t size : tensor.sizes()) crc = ExtendWithNumber(crc, static_cast<uint64_t>(size));
    return Crc32cExtend(crc, tensor.data_ptr(), tensor.nbytes());
  }
  if (value.isString()) return ExtendWithText(crc, value.toStringRef());
  if (value.isInt()) return ExtendWithNumber(crc, static_cast<uint64_t>(value.toInt()));
  if (value.isBool()) return ExtendWithNumber(crc, value.toBool() ? 1 : 0);
  if (value.isDouble()) return ExtendWithNumber(crc, c10::bit_cast<uint64_t>(value.toDouble()));
  if (value.isList()) {
    for (const c10::IValue& item : value.toListRef()) crc = ExtendWithValue(crc, item, path);
    return crc;
  }
  if (value.isGenericDict()) {
    const c10::impl::GenericDict dict = value.toGenericDict();
    for (const std::string& key : SortedKeys(dict, path)) {
      crc = ExtendWithValue(ExtendWithText(crc, key), dict.at(key), path);
    }
    return crc;
  }
  throw Unreadable(path, fmt::format("it holds a value of type {}, which no checkpoint has", value.tagKind()));
}

// The value of `key`, checked to be of the kind `is_kind` tests (`kind` names it).
c10::IValue Entry(const c10::impl::GenericDict& file, const char* key, bool (c10::IValue::*is_kind)() const,
                  const char* kind, const std::string& path) {
  const auto found = file.find(key);
  if (found == file.end()) throw Unreadable(path, fmt::format("not an mgpu checkpoint: its dict has no '{}'", key));
  if (!(found->value().*is_kind)()) {
    throw Unreadable(path, fmt::format("not an mgpu checkpoint: its '{}' is not {}", key, kind));
  }
  return found->value();
}

CheckpointFileContents DecodeVersion2(const std::string& bytes, const std::string& path) {
  const size_t end_record = bytes.rfind(kZipEndRecord);
  if (end_record == std::string::npos || bytes.size() - end_record < kZipEndRecordSize) {
    throw Unreadable(path, fmt::format("truncated: a zip archive of {} bytes without its end record (the file was "
                                       "cut short)",
                                       bytes.size()));
  }
  const c10::IValue object = ReadTorchArchive(bytes, path);
  if (!object.isGenericDict()) throw Unreadable(path, "not an mgpu checkpoint: a torch.save archive, but not of a dict");
  const c10::impl::GenericDict file = object.toGenericDict();
  SortedKeys(file, path);  // refuses a key that is not a string: the loops below read them as strings
  const std::string format = Entry(file, "format", &c10::IValue::isString, "a string", path).toStringRef();
  if (format != kFormat) {
    throw Unreadable(path, fmt::format("not an mgpu checkpoint: its format is '{}', not '{}'", format, kFormat));
  }
  const int64_t version = Entry(file, "format_version", &c10::IValue::isInt, "an integer", path).toInt();
  if (version != kCheckpointFormatVersion) {
    throw Unreadable(path, fmt::format("format version {}, but this mgpu-worker reads versions 1 and {} (written by "
                                       "a newer mgpu?)",
                                       version, kCheckpointFormatVersion));
  }
  CheckpointFileContents contents{Entry(file, "header", &c10::IValue::isString, "a string", path).toStringRef(),
                                  c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get())};
  const int64_t stored = Entry(file, "crc32c", &c10::IValue::isInt, "an integer", path).toInt();
  for (const auto& entry : file) {
    if (!IsReserved(entry.key().toStringRef())) contents.state.insert(entry.key(), entry.value());
  }
  const uint32_t computed = CheckpointStateCrc32c(contents.header, contents.state);
  if (stored != static_cast<int64_t>(computed)) {
    throw Unreadable(path, fmt::format("corrupt: CRC-32C of the contents is {:08x}, the file records {:08x} (changed "
                                       "after it was written)",
                                       computed, static_cast<uint64_t>(stored)));
  }
  return contents;
}

CheckpointFileContents DecodeVersion1(const std::string& bytes, const std::string& path) {
  if (bytes.size() < kVersion1PrefixSize) {
    throw Unreadable(path, fmt::format("truncated: {} bytes, shorter than the {}-byte prefix", bytes.size(),
                                       kVersion1PrefixSize));
  }
  const uint64_t version = GetLittleEndian(bytes, 8, 4);
  if (version != 1) {
    throw Unreadable(path, fmt::format("format version {}, but this mgpu-worker reads versions 1 and {}", version,
                                       kCheckpointFormatVersion));
  }
  const uint64_t header_size = GetLittleEndian(bytes, 12, 8);
  const uint64_t payload_size = GetLittleEndian(bytes, 20, 8);
  const uint64_t body_size = bytes.size() - kVersion1PrefixSize;
  if (header_size > body_size || payload_size > body_size - header_size) {
    throw Unreadable(path, fmt::format("truncated: {} bytes, but its prefix announces {}", bytes.size(),
                                       kVersion1PrefixSize + header_size + payload_size));
  }
  if (header_size + payload_size != body_size) {
    throw Unreadable(path, fmt::format("corrupt: {} bytes after the announced end", body_size - header_size - payload_size));
  }
  const uint32_t stored = static_cast<uint32_t>(GetLittleEndian(bytes, 28, 4));
  const uint32_t computed = Crc32c(bytes.data() + kVersion1PrefixSize, body_size);
  if (stored != computed) {
    throw Unreadable(path, fmt::format("corrupt: CRC-32C of the contents is {:08x}, the file records {:08x} (changed "
                                       "after it was written)",
                                       computed, stored));
  }
  const c10::IValue state = ReadTorchArchive(bytes.substr(kVersion1PrefixSize + header_size), path);
  if (!state.isGenericDict()) throw Unreadable(path, "not an mgpu checkpoint: its tensors are not a dict");
  SortedKeys(state.toGenericDict(), path);  // refuses a key that is not a string, as format 2 does
  return CheckpointFileContents{bytes.substr(kVersion1PrefixSize, header_size), state.toGenericDict()};
}

}  // namespace

uint32_t CheckpointStateCrc32c(const std::string& header, const c10::impl::GenericDict& state) {
  uint32_t crc = ExtendWithText(0, header);
  for (const std::string& key : SortedKeys(state, "")) {
    if (!IsReserved(key)) crc = ExtendWithValue(ExtendWithText(crc, key), state.at(key), "");
  }
  return crc;
}

std::string EncodeCheckpointFile(const std::string& header, const c10::impl::GenericDict& state) {
  c10::impl::GenericDict file(c10::StringType::get(), c10::AnyType::get());
  file.insert("format", std::string(kFormat));
  file.insert("format_version", kCheckpointFormatVersion);
  file.insert("header", header);
  file.insert("crc32c", static_cast<int64_t>(CheckpointStateCrc32c(header, state)));
  for (const auto& entry : state) file.insert(entry.key(), entry.value());
  return WriteTorchArchive(file);
}

CheckpointFileContents DecodeCheckpointFile(const std::string& bytes, const std::string& path) {
  if (bytes.compare(0, kVersion1MagicSize, kVersion1Magic) == 0) return DecodeVersion1(bytes, path);
  if (bytes.compare(0, 4, kZipLocalHeader) == 0) return DecodeVersion2(bytes, path);
  if (bytes.size() < 4 || std::string(kVersion1Magic).compare(0, bytes.size(), bytes) == 0) {
    throw Unreadable(path, fmt::format("truncated: {} bytes", bytes.size()));
  }
  throw Unreadable(path, "not an mgpu checkpoint (neither a torch.save archive nor a file starting with MGPUCKPT)");
}

}  // namespace mgpu
