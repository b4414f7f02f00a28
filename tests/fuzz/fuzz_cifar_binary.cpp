// CIFAR-10 binary batches: data/cifar10.h. Records are 3073 bytes; the corpus holds batches of
// one and two records, and the target reads the input as a batch of as many whole records as
// it holds (at least one), so both the record checks and the size checks run.
#include "data/cifar10.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int64_t records = std::max<int64_t>(1, static_cast<int64_t>(size) / mgpu::kCifarRecordBytes);
  const std::string path = mgpu::fuzz::WriteInputFile(data, size, "data_batch_1.bin");
  mgpu::fuzz::ExpectParsedOrRefused([&] { mgpu::ReadCifarBatch(path, records); });
  return 0;
}
