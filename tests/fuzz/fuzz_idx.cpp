// IDX (MNIST / Fashion-MNIST) files, raw or gzip: data/idx_reader.h. The corpus has valid files
// of rank 1 and 3 in both encodings; the byte after the magic's type picks the rank asked for.
#include "data/idx_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int rank = size >= 4 ? data[3] % 4 : 1;
  const std::string path = mgpu::fuzz::WriteInputFile(data, size, "images-idx-ubyte.gz");
  mgpu::fuzz::ExpectParsedOrRefused([&] { mgpu::ReadIdxFile(path, rank); });
  return 0;
}
