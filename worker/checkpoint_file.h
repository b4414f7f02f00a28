// The byte layout of an mgpu checkpoint file, so that a truncated, corrupted or foreign file is
// recognized before anything in it is trusted:
//
//   offset  size  field
//        0     8  magic "MGPUCKPT"
//        8     4  format version (little-endian; kCheckpointFormatVersion)
//       12     8  header size H (little-endian)
//       20     8  payload size P (little-endian)
//       28     4  CRC-32C of the H + P bytes that follow
//       32     H  header: JSON (what the run was and where it stood; readable with `head -c`)
//     32+H     P  payload: the tensors, pickled as torch.save does (torch::pickle_save)
//
// Decoding checks the magic, the version, the size (truncated or trailing bytes) and the
// checksum, in that order, and says which failed.
#pragma once

#include <cstdint>
#include <string>

namespace mgpu {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

struct CheckpointFileContents {
  std::string header;   // JSON text
  std::string payload;  // pickled tensors
};

std::string EncodeCheckpointFile(const CheckpointFileContents& contents);

// Throws BadInputError naming `path` (used in messages only) and what is wrong.
CheckpointFileContents DecodeCheckpointFile(const std::string& bytes, const std::string& path);

}  // namespace mgpu
