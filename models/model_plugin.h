// The interface of a model plugin: a shared library of C++ model factories that mgpu trains
// with `--model plugin:LIB.so:NAME`. The only mgpu header a plugin includes.
//
// A plugin defines its model as an mgpu::Classifier (forward: (B, C, H, W) float images →
// (B, num_classes) logits), announces the interface it was built against once, and exports one
// factory per model, named mgpu_model_NAME:
//
//   #include "models/model_plugin.h"
//
//   class TinyCnn : public mgpu::Classifier { ... };
//
//   MGPU_MODEL_PLUGIN_INFO();
//
//   extern "C" MGPU_MODEL_PLUGIN_EXPORT void* mgpu_model_tiny_cnn(const MgpuModelShape* shape,
//                                                                 char* error, size_t error_size) {
//     return mgpu::HandOverModel(error, error_size, [&] {
//       return std::make_shared<TinyCnn>(shape->in_channels, shape->num_classes);
//     });
//   }
//
// and builds it as a shared library against the same LibTorch as mgpu (in CMake:
// add_library(NAME SHARED ...) + target_link_libraries(NAME PRIVATE torch)).
//
// The hand-off: a model is a C++ object, so it crosses the library boundary as a C pointer to a
// heap-allocated std::shared_ptr<mgpu::Classifier>, which mgpu takes over (and deletes). A factory
// must not let an exception escape (there is no C++ ABI for that across dlopen'd code):
// HandOverModel turns one into a null return and the message into `error`, which mgpu reports.
// Passing C++ objects is only safe between binaries built against the same LibTorch with the same
// C++ library ABI; mgpu reads mgpu_model_plugin_info() first and refuses a plugin built against
// another interface version, LibTorch version or _GLIBCXX_USE_CXX11_ABI setting, before calling
// any factory.
//
// mgpu calls a factory once per model it builds: for the trained model, and again for each
// --mode dp replica, so a factory must build a new model each time. Initial weights come from
// LibTorch's default generator, which mgpu seeds with --seed before the first call. The library
// stays loaded until the process exits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>

#include <torch/version.h>

#include "models/classifier.h"

#define MGPU_MODEL_PLUGIN_EXPORT __attribute__((visibility("default")))

extern "C" {

// Version of this interface: the layout of the structs below and the hand-off.
#define MGPU_MODEL_PLUGIN_ABI_VERSION 1

// The data set's shape, which the model must take.
struct MgpuModelShape {
  int64_t in_channels;  // C of the (B, C, H, W) images
  int64_t num_classes;  // width of the logits
  int64_t height;       // H and W after augmentation (e.g. --resize)
  int64_t width;
};

// What a plugin was built against; compared with mgpu's own before any factory is called.
struct MgpuModelPluginInfo {
  uint32_t abi_version;       // MGPU_MODEL_PLUGIN_ABI_VERSION
  const char* torch_version;  // TORCH_VERSION, e.g. "2.11.0"
  int32_t cxx11_abi;          // _GLIBCXX_USE_CXX11_ABI (std::string's layout)
};

// mgpu_model_NAME: builds a model for `shape`. Returns a `new std::shared_ptr<mgpu::Classifier>`
// cast to void*, owned by the caller from then on; or nullptr with a message of at most
// error_size - 1 characters in `error` (NUL-terminated).
typedef void* (*MgpuModelFactory)(const MgpuModelShape* shape, char* error, size_t error_size);

}  // extern "C"

// Name of the symbol mgpu reads the plugin's info from, and the prefix of every factory's.
#define MGPU_MODEL_PLUGIN_INFO_SYMBOL "mgpu_model_plugin_info"
#define MGPU_MODEL_FACTORY_PREFIX "mgpu_model_"

// Defines mgpu_model_plugin_info() for the interface this header describes; once per plugin.
#define MGPU_MODEL_PLUGIN_INFO()                                                     \
  extern "C" MGPU_MODEL_PLUGIN_EXPORT const MgpuModelPluginInfo* mgpu_model_plugin_info() { \
    static const MgpuModelPluginInfo info = {MGPU_MODEL_PLUGIN_ABI_VERSION, TORCH_VERSION,   \
                                             _GLIBCXX_USE_CXX11_ABI};                        \
    return &info;                                                                  \
  }                                                                                \
  static_assert(true, "a semicolon after MGPU_MODEL_PLUGIN_INFO()")

namespace mgpu {

// The body of a factory: calls `make` (returning std::shared_ptr<mgpu::Classifier> or a
// subclass) and hands the model over as the factory's return value; an exception becomes
// nullptr and its message in `error`.
template <typename Make>
void* HandOverModel(char* error, size_t error_size, Make make) {
  try {
    std::shared_ptr<Classifier> model = make();
    if (model == nullptr) throw std::runtime_error("the factory built no model (a null pointer)");
    return new std::shared_ptr<Classifier>(std::move(model));
  } catch (const std::exception& e) {
    if (error_size > 0) {
      std::strncpy(error, e.what(), error_size - 1);
      error[error_size - 1] = '\0';
    }
    return nullptr;
  }
}

}  // namespace mgpu
