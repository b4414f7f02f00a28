// nvJPEG, opened at run time (dlopen) for `--decode gpu`, so that a CPU-only build, CI and every
// run with `--decode cpu` link and load no GPU library. The function table holds the few entry
// points data/gpu_jpeg_batches.cpp calls; it exists only in builds that saw nvjpeg.h
// (MGPU_HAVE_NVJPEG, set by data/CMakeLists.txt from the nvidia-nvjpeg wheel's include folder).
//
// Where libnvjpeg is looked for, in order: $MGPU_NVJPEG_LIBRARY (a path); the folder of the CUDA
// runtime that LibTorch loaded (the nvidia-* wheels put libnvjpeg beside libcudart); the
// loader's search path (LD_LIBRARY_PATH, ld.so.cache: a CUDA toolkit's lib64).
#pragma once

#include <string>

#ifdef MGPU_HAVE_NVJPEG
#include <nvjpeg.h>
#endif

namespace mgpu {

// The library's file name for the CUDA major release LibTorch was built with (13).
constexpr char kNvjpegSoname[] = "libnvjpeg.so.13";
// What to tell a user who lacks it.
constexpr char kNvjpegInstallHint[] =
    "install it with `pip install 'nvidia-nvjpeg==13.0.*'` into the Python environment of the torch wheel "
    "(scripts/setup.sh does), or set MGPU_NVJPEG_LIBRARY to the path of libnvjpeg.so.13 (a CUDA 13 "
    "toolkit's lib64 has it)";

// "" when this build can decode on the GPU and libnvjpeg opens, else what is missing and how to
// get it (without the --decode flag's name: callers add it).
std::string WhyNoNvjpeg();

#ifdef MGPU_HAVE_NVJPEG
struct NvjpegLibrary {
  std::string path;  // the file opened
  std::string version;  // "13.0.1"
  decltype(&nvjpegGetProperty) GetProperty = nullptr;
  decltype(&nvjpegCreateEx) CreateEx = nullptr;
  decltype(&nvjpegDestroy) Destroy = nullptr;
  decltype(&nvjpegJpegStateCreate) JpegStateCreate = nullptr;
  decltype(&nvjpegJpegStateDestroy) JpegStateDestroy = nullptr;
  decltype(&nvjpegDecodeBatchedInitialize) DecodeBatchedInitialize = nullptr;
  decltype(&nvjpegDecodeBatched) DecodeBatched = nullptr;
  decltype(&nvjpegDecodeBatchedEx) DecodeBatchedEx = nullptr;
  decltype(&nvjpegDecodeParamsCreate) DecodeParamsCreate = nullptr;
  decltype(&nvjpegDecodeParamsDestroy) DecodeParamsDestroy = nullptr;
  decltype(&nvjpegDecodeParamsSetOutputFormat) DecodeParamsSetOutputFormat = nullptr;
  decltype(&nvjpegDecodeParamsSetROI) DecodeParamsSetROI = nullptr;
};

// The library, opened once per process (never closed). Throws BadInputError saying what is
// missing and how to install it.
const NvjpegLibrary& OpenNvjpeg();
#endif

}  // namespace mgpu
