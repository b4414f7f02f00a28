// WebDataset tar shards' index: data/tar_index.h (ustar, GNU long names and base-256 sizes,
// pax path records). Every member found must lie inside the file.
#include <cstdlib>

#include "data/tar_index.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mgpu::fuzz::WriteInputFile(data, size, "shard.tar");
  mgpu::fuzz::ExpectParsedOrRefused([&] {
    for (const mgpu::TarMember& member : mgpu::ReadTarIndex(path)) {
      if (member.offset < 0 || member.size < 0 || member.size > static_cast<int64_t>(size) - member.offset) std::abort();
    }
  });
  return 0;
}
