#include "data/nvjpeg_decoder.h"

#if defined(MGPU_HAVE_NVJPEG) && defined(MGPU_WITH_CUDA)
#include <chrono>
#include <thread>

#include <fmt/format.h>

namespace mgpu {

namespace {

const char* BackendName(nvjpegBackend_t backend) {
  switch (backend) {
    case NVJPEG_BACKEND_HARDWARE: return "hardware (the GPU's JPEG engines)";
    case NVJPEG_BACKEND_GPU_HYBRID: return "GPU-hybrid (Huffman decode on the GPU)";
    default: return "default";
  }
}

}  // namespace

void WaitForStream(cudaStream_t stream) {
  while (cudaStreamQuery(stream) == cudaErrorNotReady) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

torch::Tensor DecodedChunk::Crop(const torch::Tensor& buffer, size_t k) const {
  const Place& p = places[k];
  const torch::Tensor planes = buffer.narrow(0, p.offset, 3 * p.height * p.width).view({3, p.height, p.width});
  if (p.crop.height == p.height && p.crop.width == p.width) return planes;
  return planes.narrow(1, p.crop.top, p.crop.height).narrow(2, p.crop.left, p.crop.width);
}

std::unique_ptr<NvjpegDecoder> NvjpegDecoder::TryCreate(const NvjpegLibrary& lib, nvjpegBackend_t backend) {
  nvjpegHandle_t handle = nullptr;
  if (lib.CreateEx(backend, nullptr, nullptr, 0, &handle) != NVJPEG_STATUS_SUCCESS) return nullptr;
  nvjpegJpegState_t state = nullptr;
  if (lib.JpegStateCreate(handle, &state) != NVJPEG_STATUS_SUCCESS) {
    lib.Destroy(handle);
    return nullptr;
  }
  return std::unique_ptr<NvjpegDecoder>(new NvjpegDecoder(lib, backend, handle, state));
}

NvjpegDecoder::NvjpegDecoder(const NvjpegLibrary& lib, nvjpegBackend_t backend, nvjpegHandle_t handle,
                             nvjpegJpegState_t state)
    : lib_(lib), backend_(backend), handle_(handle), state_(state) {
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
  const auto n = static_cast<int>(chunk.size());
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
  std::vector<nvjpegImage_t> images(chunk.size());
  std::vector<const unsigned char*> data(chunk.size());
  std::vector<size_t> lengths(chunk.size());
  uint8_t* base = out.pixels.data_ptr<uint8_t>();
  for (size_t k = 0; k < chunk.size(); ++k) {
    const DecodedChunk::Place& p = out.places[k];
    for (int c = 0; c < 3; ++c) {
      images[k].channel[c] = base + p.offset + c * p.height * p.width;
      images[k].pitch[c] = static_cast<size_t>(p.width);
    }
    data[k] = chunk[k].data;
    lengths[k] = chunk[k].size;
  }
  // The hardware backend writes its output when it is called, not in the stream's order
  // (meta-pytorch/torchcodec#1634, seen on H100 with nvJPEG 12.3-13.2): the buffer, which the
  // caching allocator may have handed out again while work enqueued before still reads it, is
  // written only once the stream has run that work.
  if (backend_ == NVJPEG_BACKEND_HARDWARE) WaitForStream(stream);
  if (initialized_for_ != n) {
    if (lib_.DecodeBatchedInitialize(handle_, state_, n, 1, NVJPEG_OUTPUT_RGB) != NVJPEG_STATUS_SUCCESS) return false;
    initialized_for_ = n;
  }
  if (!region) {
    return lib_.DecodeBatched(handle_, state_, data.data(), lengths.data(), images.data(), stream) ==
           NVJPEG_STATUS_SUCCESS;
  }
  if (!EnsureRegionParams(chunk.size())) return false;
  for (size_t k = 0; k < chunk.size(); ++k) {
    const Window& w = chunk[k].window;
    lib_.DecodeParamsSetROI(params_[k], static_cast<int>(w.left), static_cast<int>(w.top), static_cast<int>(w.width),
                            static_cast<int>(w.height));
  }
  return lib_.DecodeBatchedEx(handle_, state_, data.data(), lengths.data(), images.data(), params_.data(), stream) ==
         NVJPEG_STATUS_SUCCESS;
}

}  // namespace mgpu
#endif
