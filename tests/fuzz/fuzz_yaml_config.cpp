// YAML config files (`mgpu-worker --config`, and the jobs `mgpu submit` sends): the entry point
// that applies a file to the option table, ApplyYamlFile in config/train_config.h.
#include "tests/fuzz/fuzz_input.h"
#include "config/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mgpu::fuzz::WriteInputFile(data, size, "config.yaml");
  mgpu::fuzz::ExpectParsedOrRefused([&] {
    mgpu::TrainConfig config;
    mgpu::ApplyYamlFile(config, path);
  });
  return 0;
}
