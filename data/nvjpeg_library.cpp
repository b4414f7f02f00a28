#include "data/nvjpeg_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {

#ifndef MGPU_HAVE_NVJPEG

std::string WhyNoNvjpeg() {
  return "this mgpu was built without nvJPEG's header (nvjpeg.h), so GPU decoding is compiled out; "
         "rebuild after `make deps` has installed the nvidia-nvjpeg wheel beside torch (scripts/setup.sh "
         "reports where it found nvjpeg.h), on a LibTorch with CUDA";
}

#else

namespace {

// The folder of the CUDA runtime already loaded by LibTorch, with a trailing '/', or "".
std::string CudaRuntimeFolder() {
  void* symbol = dlsym(RTLD_DEFAULT, "cudaGetDeviceCount");
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string file = info.dli_fname;
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? "" : file.substr(0, slash + 1);
}

struct Opened {
  NvjpegLibrary library;
  std::string error;  // "" when opened
};

template <typename Function>
bool Bind(void* handle, const char* name, Function& slot, std::string& missing) {
  slot = reinterpret_cast<Function>(dlsym(handle, name));
  if (slot == nullptr) missing += missing.empty() ? name : std::string(", ") + name;
  return slot != nullptr;
}

Opened Open() {
  Opened opened;
  std::vector<std::string> candidates;
  if (const char* given = std::getenv("MGPU_NVJPEG_LIBRARY"); given != nullptr && *given != '\0') {
    candidates.push_back(given);
  } else {
    if (const std::string folder = CudaRuntimeFolder(); !folder.empty()) candidates.push_back(folder + kNvjpegSoname);
    candidates.push_back(kNvjpegSoname);
  }
  void* handle = nullptr;
  std::vector<std::string> tried;
  for (const std::string& candidate : candidates) {
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      opened.library.path = candidate;
      break;
    }
    tried.push_back(dlerror());
  }
  if (handle == nullptr) {
    opened.error = fmt::format("nvJPEG ({}) cannot be opened ({}); {}", kNvjpegSoname, fmt::join(tried, "; "),
                               kNvjpegInstallHint);
    return opened;
  }
  NvjpegLibrary& lib = opened.library;
  std::string missing;
  Bind(handle, "nvjpegGetProperty", lib.GetProperty, missing);
  Bind(handle, "nvjpegCreateEx", lib.CreateEx, missing);
  Bind(handle, "nvjpegDestroy", lib.Destroy, missing);
  Bind(handle, "nvjpegJpegStateCreate", lib.JpegStateCreate, missing);
  Bind(handle, "nvjpegJpegStateDestroy", lib.JpegStateDestroy, missing);
  Bind(handle, "nvjpegDecodeBatchedInitialize", lib.DecodeBatchedInitialize, missing);
  Bind(handle, "nvjpegDecodeBatched", lib.DecodeBatched, missing);
  Bind(handle, "nvjpegDecodeBatchedEx", lib.DecodeBatchedEx, missing);
  Bind(handle, "nvjpegDecodeParamsCreate", lib.DecodeParamsCreate, missing);
  Bind(handle, "nvjpegDecodeParamsDestroy", lib.DecodeParamsDestroy, missing);
  Bind(handle, "nvjpegDecodeParamsSetOutputFormat", lib.DecodeParamsSetOutputFormat, missing);
  Bind(handle, "nvjpegDecodeParamsSetROI", lib.DecodeParamsSetROI, missing);
  if (!missing.empty()) {
    opened.error = fmt::format("{} lacks {} (an nvJPEG older than CUDA 13's?); {}", lib.path, missing,
                               kNvjpegInstallHint);
    return opened;
  }
  int major = 0, minor = 0, patch = 0;
  lib.GetProperty(MAJOR_VERSION, &major);
  lib.GetProperty(MINOR_VERSION, &minor);
  lib.GetProperty(PATCH_LEVEL, &patch);
  lib.version = fmt::format("{}.{}.{}", major, minor, patch);
  return opened;
}

const Opened& OpenOnce() {
  static const Opened opened = Open();
  return opened;
}

}  // namespace

std::string WhyNoNvjpeg() { return OpenOnce().error; }

const NvjpegLibrary& OpenNvjpeg() {
  const Opened& opened = OpenOnce();
  if (!opened.error.empty()) throw BadInputError(opened.error);
  return opened.library;
}

#endif

}  // namespace mgpu
