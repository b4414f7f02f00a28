// The file an mgpu checkpoint is, so that Python can read it and a truncated, corrupted or
// foreign file is recognized before anything in it is trusted.
//
// Format version 2 (written since 2026-11-26): a torch.save archive (zip) of one dict, which
// Python's torch.load(path, weights_only=True) reads, as it reads a Lightning .ckpt:
//
//   key             value
//   format          "mgpu-checkpoint"
//   format_version  2
//   header          JSON text: the run's identity, position, schedule and finished epochs
//                   (worker/checkpoint.h)
//   crc32c          CRC-32C of the header and of the state (CheckpointStateCrc32c), an int
//   ...             the state: tensors, lists of tensors (None for an absent one) and dicts of
//                   name → tensor (worker/checkpoint.cpp names them)
//
// Format version 1 (before 2026-11-26) is still read: a 32-byte prefix (magic "MGPUCKPT",
// version, header and payload sizes, CRC-32C of both), the JSON header, then the state pickled
// as torch::pickle_save does.
//
// Decoding reads the archive within its bytes (worker/torch_archive.h), then checks the format,
// the version and the checksum, in that order, and says which failed.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

namespace mgpu {

inline constexpr int64_t kCheckpointFormatVersion = 2;

struct CheckpointFileContents {
  std::string header;            // JSON text
  c10::impl::GenericDict state;  // string keys
};

// The file's bytes (format version 2). `state` must not use the keys the format reserves
// (format, format_version, header, crc32c).
std::string EncodeCheckpointFile(const std::string& header, const c10::impl::GenericDict& state);

// Reads either format version. Throws BadInputError naming `path` (used in messages only) and
// what is wrong.
CheckpointFileContents DecodeCheckpointFile(const std::string& bytes, const std::string& path);

// The checksum version 2 records: CRC-32C over the header's bytes, then over the state's entries
// in order of their keys (each key's bytes, then its value: a tensor's dtype name, sizes and
// bytes in C order; a list's items; a dict's entries by key; a string's bytes; a number's 8
// little-endian bytes; nothing for None). The keys the format reserves are left out.
uint32_t CheckpointStateCrc32c(const std::string& header, const c10::impl::GenericDict& state);

}  // namespace mgpu
