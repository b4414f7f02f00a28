// A plugin built against another mgpu and LibTorch, as mgpu_model_plugin_info() tells: the
// integration tests check that mgpu refuses it before calling its factory. It declares the
// plugin interface's C types itself, as an older models/model_plugin.h would have.
#include <cstddef>
#include <cstdint>

extern "C" {

struct ForeignPluginInfo {
  uint32_t abi_version;
  const char* torch_version;
  int32_t cxx11_abi;
};

__attribute__((visibility("default"))) const ForeignPluginInfo* mgpu_model_plugin_info() {
  static const ForeignPluginInfo info = {0, "1.13.1", 0};
  return &info;
}

// Never called: mgpu refuses the plugin first.
__attribute__((visibility("default"))) void* mgpu_model_tiny_cnn(const void*, char*, size_t) { return nullptr; }

}  // extern "C"
