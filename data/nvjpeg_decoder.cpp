#include "data/nvjpeg_decoder.h"

#if defined(MGPU_HAVE_NVJPEG) && defined(MGPU_WITH_CUDA)
#include <chrono>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <jpeglib.h>

namespace mgpu {

namespace {

const char* BackendName(nvjpegBackend_t backend) {
  switch (backend) {
    case NVJPEG_BACKEND_HARDWARE: return "hardware (the GPU's JPEG engines)";
    case NVJPEG_BACKEND_GPU_HYBRID: return "GPU-hybrid (Huffman decode on the GPU)";
    default: return "default";
  }
}

constexpr int kPaddingSide = 16;

// A grey kPaddingSide x kPaddingSide baseline JPEG (4:2:0, one MCU), written by libjpeg-turbo.
std::vector<unsigned char> PaddingJpeg() {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr errors{};
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = kPaddingSide;
  cinfo.image_height = kPaddingSide;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  std::vector<unsigned char> row(3 * kPaddingSide, 128);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&cinfo, rows, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<unsigned char> bytes(out, out + size);
  jpeg_destroy_compress(&cinfo);
  std::free(out);
  return bytes;
}

}  // namespace

void WaitForStream(cudaStream_t stream) {
  while (cudaStreamQuery(stream) == cudaErrorNotReady) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

std::unique_ptr<NvjpegDecoder> NvjpegDecoder::TryCreate(const NvjpegLibrary& lib, nvjpegBackend_t backend,
                                                        int call_images) {
  nvjpegHandle_t handle = nullptr;
  // The hardware backend by default buffers images beyond those of a call (its pipeline). Without that buffering,
  // ResNet-18 at 224 trained 4-12% faster beside it on one H100, in every one of seven alternating pairs
  // (bench/results/2026-11-27-2xH100-nvjpeg-no-pipeline/). The other backends ignore the flag.
  const unsigned flags = NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE;
  if (lib.CreateEx(backend, nullptr, nullptr, flags, &handle) != NVJPEG_STATUS_SUCCESS) return nullptr;
  nvjpegJpegState_t state = nullptr;
  if (lib.JpegStateCreate(handle, &state) != NVJPEG_STATUS_SUCCESS) {
    lib.Destroy(handle);
    return nullptr;
  }
  return std::unique_ptr<NvjpegDecoder>(new NvjpegDecoder(lib, backend, handle, state, call_images));
}

NvjpegDecoder::NvjpegDecoder(const NvjpegLibrary& lib, nvjpegBackend_t backend, nvjpegHandle_t handle,
                             nvjpegJpegState_t state, int call_images)
    : lib_(lib), backend_(backend), handle_(handle), state_(state), call_images_(call_images),
      padding_(PaddingJpeg()),
      padding_out_(torch::empty({call_images, 3 * kPaddingSide * kPaddingSide},
                                torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA))) {
  region_decode_ = backend_ == NVJPEG_BACKEND_HARDWARE;
}

NvjpegDecoder::~NvjpegDecoder() {
  for (nvjpegDecodeParams_t params : params_) lib_.DecodeParamsDestroy(params);
  lib_.JpegStateDestroy(state_);
  lib_.Destroy(handle_);
}

std::string NvjpegDecoder::Describe() const {
  return fmt::format("{} backend, {}", BackendName(backend_),
                     region_decode_ ? "region-of-interest decode of each crop" : "full decode, crop on the device");
}

bool NvjpegDecoder::Decode(const std::vector<EncodedCrop>& chunk, cudaStream_t stream, DecodedChunk& out) {
  if (chunk.size() > static_cast<size_t>(call_images_)) {  // one call decodes call_images_ at most
    throw std::logic_error(fmt::format("NvjpegDecoder::Decode: a chunk of {} images, more than the {} of a call",
                                       chunk.size(), call_images_));
  }
  if (region_decode_) {
    if (DecodeAll(chunk, true, stream, out)) return true;
    if (!DecodeAll(chunk, false, stream, out)) return false;
    region_decode_ = false;  // the full decode worked: this GPU or nvJPEG refuses regions
    return true;
  }
  return DecodeAll(chunk, false, stream, out);
}

bool NvjpegDecoder::EnsureRegionParams(size_t n) {
  while (params_.size() < n) {
    nvjpegDecodeParams_t params = nullptr;
    if (lib_.DecodeParamsCreate(handle_, &params) != NVJPEG_STATUS_SUCCESS) return false;
    lib_.DecodeParamsSetOutputFormat(params, NVJPEG_OUTPUT_RGB);
    params_.push_back(params);
  }
  return true;
}

bool NvjpegDecoder::DecodeAll(const std::vector<EncodedCrop>& chunk, bool region, cudaStream_t stream,
                              DecodedChunk& out) {
  out.places.assign(chunk.size(), {});
  int64_t total = 0;
  for (size_t k = 0; k < chunk.size(); ++k) {
    const EncodedCrop& c = chunk[k];
    DecodedChunk::Place& p = out.places[k];
    p.offset = total;
    p.height = region ? c.window.height : c.full.height;
    p.width = region ? c.window.width : c.full.width;
    p.crop = region ? Window{0, 0, p.height, p.width} : c.window;
    total += 3 * p.height * p.width;
  }
  out.pixels = torch::empty({total}, torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA));
  const auto calls = static_cast<size_t>(call_images_);
  std::vector<nvjpegImage_t> images(calls);
  std::vector<const unsigned char*> data(calls, padding_.data());
  std::vector<size_t> lengths(calls, padding_.size());
  for (size_t k = 0; k < calls; ++k) {
    const bool padding = k >= chunk.size();
    uint8_t* base = padding ? padding_out_[static_cast<int64_t>(k)].data_ptr<uint8_t>()
                            : out.pixels.data_ptr<uint8_t>() + out.places[k].offset;
    const int64_t height = padding ? kPaddingSide : out.places[k].height;
    const int64_t width = padding ? kPaddingSide : out.places[k].width;
    for (int c = 0; c < 3; ++c) {
      images[k].channel[c] = base + c * height * width;
      images[k].pitch[c] = static_cast<size_t>(width);
    }
    if (padding) continue;
    data[k] = chunk[k].data;
    lengths[k] = chunk[k].size;
  }
  // The hardware backend writes its output when it is called, not in the stream's order
  // (meta-pytorch/torchcodec#1634, seen on H100 with nvJPEG 12.3-13.2): the buffer, which the
  // caching allocator may have handed out again while work enqueued before still reads it, is
  // written only once the stream has run that work.
  if (backend_ == NVJPEG_BACKEND_HARDWARE) WaitForStream(stream);
  if (!initialized_) {
    if (lib_.DecodeBatchedInitialize(handle_, state_, call_images_, 1, NVJPEG_OUTPUT_RGB) != NVJPEG_STATUS_SUCCESS) {
      return false;
    }
    initialized_ = true;
  }
  if (!region) {
    return lib_.DecodeBatched(handle_, state_, data.data(), lengths.data(), images.data(), stream) ==
           NVJPEG_STATUS_SUCCESS;
  }
  if (!EnsureRegionParams(calls)) return false;
  for (size_t k = 0; k < calls; ++k) {
    const Window w = k < chunk.size() ? chunk[k].window : Window{0, 0, kPaddingSide, kPaddingSide};
    lib_.DecodeParamsSetROI(params_[k], static_cast<int>(w.left), static_cast<int>(w.top), static_cast<int>(w.width),
                            static_cast<int>(w.height));
  }
  return lib_.DecodeBatchedEx(handle_, state_, data.data(), lengths.data(), images.data(), params_.data(), stream) ==
         NVJPEG_STATUS_SUCCESS;
}

}  // namespace mgpu
#endif
