// Pickles of CIFAR-10's Python release: data/python_pickle.h, as data/cifar10.cpp reads a batch
// (the 'data' entry as a numpy uint8 array, the 'labels' list).
#include "data/python_pickle.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  mgpu::fuzz::ExpectParsedOrRefused([&] {
    const mgpu::PickleRef batch = mgpu::ReadPickle(bytes, "data_batch_1");
    if (batch->kind != mgpu::PickleValue::Kind::kDict) return;
    if (const mgpu::PickleRef labels = batch->Find("labels")) (void)labels->items.size();
    if (const mgpu::PickleRef pixels = batch->Find("data")) mgpu::AsUint8Array(pixels, "data_batch_1", "'data'");
  });
  return 0;
}
