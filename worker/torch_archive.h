// torch.save archives (zip: data.pkl plus one record per tensor storage) as Python's
// torch.load(path, weights_only=True) reads them: written untagged, and read from files that may
// have been rewritten by anyone, so nothing in one is trusted before it is read.
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

// `value` (dicts, lists, tensors, strings, numbers) as a torch.save archive whose pickle is
// untagged: torch::pickle_save would wrap containers in torch.jit._pickle.restore_type_tag, a
// global that torch.load(weights_only=True) refuses.
std::string WriteTorchArchive(const c10::IValue& value);

// The archive's object. Throws mgpu::BadInputError naming `path` as a checkpoint and what is wrong
// when the archive or its pickle is malformed or declares more than it holds, a tensor's view
// reaches outside its storage, or containers nest deeper than any mgpu archive's.
c10::IValue ReadTorchArchive(const std::string& archive, const std::string& path);

}  // namespace mgpu
