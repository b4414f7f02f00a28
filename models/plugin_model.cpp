#include "models/plugin_model.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "common/status.h"
#include "models/model_plugin.h"

namespace mgpu {
namespace {

constexpr size_t kErrorSize = 1024;  // room for a factory's message

// `bytes`[offset, offset + sizeof(T)) as a T, or false when the file is too short for it.
template <typename T>
bool ReadAt(const std::string& bytes, uint64_t offset, T& out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(&out, bytes.data() + offset, sizeof(T));
  return true;
}

std::string FactoryList(const std::string& library) {
  const std::vector<std::string> names = PluginFactoryNames(library);
  if (names.empty()) return fmt::format("it exports no {}* function", MGPU_MODEL_FACTORY_PREFIX);
  return fmt::format("its factories are: {}", fmt::join(names, ", "));
}

}  // namespace

std::vector<std::string> PluginFactoryNames(const std::string& library) {
  std::ifstream file(library, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  Elf64_Ehdr header;
  if (!ReadAt(bytes, 0, header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64) {
    return {};
  }
  std::vector<std::string> names;
  const std::string prefix = MGPU_MODEL_FACTORY_PREFIX;
  for (uint16_t s = 0; s < header.e_shnum; ++s) {
    Elf64_Shdr symbols, strings;
    if (!ReadAt(bytes, header.e_shoff + uint64_t{s} * header.e_shentsize, symbols)) return {};
    if (symbols.sh_type != SHT_DYNSYM || symbols.sh_entsize != sizeof(Elf64_Sym)) continue;
    if (!ReadAt(bytes, header.e_shoff + uint64_t{symbols.sh_link} * header.e_shentsize, strings)) return {};
    for (uint64_t k = 0; k < symbols.sh_size / sizeof(Elf64_Sym); ++k) {
      Elf64_Sym symbol;
      if (!ReadAt(bytes, symbols.sh_offset + k * sizeof(Elf64_Sym), symbol)) return {};
      if (symbol.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(symbol.st_info) != STT_FUNC) continue;
      const uint64_t at = strings.sh_offset + symbol.st_name;
      if (at >= bytes.size()) continue;
      const std::string name(bytes.c_str() + at);  // the string table's NUL ends it
      if (name.rfind(prefix, 0) == 0 && name != MGPU_MODEL_PLUGIN_INFO_SYMBOL) names.push_back(name.substr(prefix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::shared_ptr<Classifier> MakePluginModel(const std::string& library, const std::string& name,
                                            const ModelShape& shape, const std::string& spec) {
  // dlopen searches the library path for a name without a slash; a plugin is a file.
  const std::string path = library.find('/') == std::string::npos ? "./" + library : library;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw BadInputError(fmt::format("--model {}: cannot load the plugin library '{}': {}; give the path of a "
                                    "shared library built with models/model_plugin.h (plugin:LIB.so:NAME)",
                                    spec, library, dlerror()));
  }
  using InfoFunction = const MgpuModelPluginInfo* (*)();
  auto info_function = reinterpret_cast<InfoFunction>(dlsym(handle, MGPU_MODEL_PLUGIN_INFO_SYMBOL));
  if (info_function == nullptr) {
    throw BadInputError(fmt::format("--model {}: '{}' does not export {}(), so it was not built as an mgpu model "
                                    "plugin; add MGPU_MODEL_PLUGIN_INFO(); from models/model_plugin.h and rebuild it",
                                    spec, library, MGPU_MODEL_PLUGIN_INFO_SYMBOL));
  }
  const MgpuModelPluginInfo& info = *info_function();
  if (info.abi_version != MGPU_MODEL_PLUGIN_ABI_VERSION || std::strcmp(info.torch_version, TORCH_VERSION) != 0 ||
      info.cxx11_abi != _GLIBCXX_USE_CXX11_ABI) {
    throw BadInputError(fmt::format(
        "--model {}: '{}' was built against plugin interface {}, LibTorch {}, _GLIBCXX_USE_CXX11_ABI={}, but this mgpu "
        "has interface {}, LibTorch {}, _GLIBCXX_USE_CXX11_ABI={}; rebuild the plugin against this mgpu's "
        "models/model_plugin.h and LibTorch",
        spec, library, info.abi_version, info.torch_version, info.cxx11_abi, MGPU_MODEL_PLUGIN_ABI_VERSION,
        TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI));
  }
  const std::string symbol = MGPU_MODEL_FACTORY_PREFIX + name;
  auto factory = reinterpret_cast<MgpuModelFactory>(dlsym(handle, symbol.c_str()));
  if (factory == nullptr) {
    throw BadInputError(fmt::format("--model {}: '{}' has no factory '{}' (looked up the symbol {}); {}; export it "
                                    "as extern \"C\" (models/model_plugin.h)",
                                    spec, library, name, symbol, FactoryList(library)));
  }
  const MgpuModelShape c_shape{shape.in_channels, shape.num_classes, shape.height, shape.width};
  std::array<char, kErrorSize> error{};
  std::unique_ptr<std::shared_ptr<Classifier>> handed(
      static_cast<std::shared_ptr<Classifier>*>(factory(&c_shape, error.data(), error.size())));
  if (handed == nullptr || *handed == nullptr) {
    throw BadInputError(fmt::format("--model {}: the factory {} in '{}' built no model for {}x{}x{} images and {} "
                                    "classes: {}",
                                    spec, symbol, library, shape.in_channels, shape.height, shape.width,
                                    shape.num_classes, error[0] != '\0' ? error.data() : "no reason given"));
  }
  return *handed;
}

}  // namespace mgpu
