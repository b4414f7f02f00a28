// The tensors of a checkpoint (the payload torch::pickle_save wrote), read from a file that may
// have been rewritten with its checksum recomputed: nothing in it is trusted before it is read.
//
// LibTorch's own reader (torch::pickle_load) trusts the archive: its vector adapter copies past
// the buffer when a zip field points beyond it, and its unpickler sizes strings and the memo
// table by the lengths and indices the pickle declares, so a few forged bytes make it read out
// of bounds or allocate gigabytes. Here every read is clamped to the payload, every record must
// fit in it, and the pickle's opcodes are walked first: only those LibTorch's pickler writes, and
// no length or memo index larger than the pickle itself.
#pragma once

#include <string>

#include <ATen/core/ivalue.h>

namespace mgpu {

// The payload's object (for an mgpu checkpoint, a dict of tensors and tensor lists). Throws
// mgpu::BadInputError naming `path` and what is wrong when the archive or its pickle is malformed
// or declares more than it holds.
c10::IValue LoadCheckpointPayload(const std::string& payload, const std::string& path);

}  // namespace mgpu
