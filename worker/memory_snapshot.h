// --memory-snapshot FILE: records the CUDA caching allocator's history (every allocation and
// free with its size and stream) from construction and writes it, at Write(), as the pickle
// that PyTorch's memory visualizer reads (https://pytorch.org/memory_viz), the same file
// torch.cuda.memory._dump_snapshot() writes. No stack traces: a C++ process has no Python
// frames, and unwinding C++ stacks on every allocation would distort the timings measured.
#pragma once

#include <string>

#include <torch/torch.h>

namespace mgpu {

class MemorySnapshot {
 public:
  // Starts recording. Throws BadInputError unless `device` is a CUDA device.
  MemorySnapshot(std::string path, const torch::Device& device);
  // Writes the snapshot (atomically) and stops recording.
  void Write();

 private:
  std::string path_;
};

}  // namespace mgpu
