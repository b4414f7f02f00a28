#include "data/gpu_jpeg_batches.h"

#include <fmt/format.h>

#include "common/status.h"
#include "data/nvjpeg_library.h"

#if defined(MGPU_HAVE_NVJPEG) && defined(MGPU_WITH_CUDA)
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "data/jpeg_header.h"
#endif

namespace mgpu {

#if !(defined(MGPU_HAVE_NVJPEG) && defined(MGPU_WITH_CUDA))

struct GpuJpegBatches::Impl {};

GpuJpegBatches::GpuJpegBatches(std::shared_ptr<const StreamingImages>, torch::Device, int64_t, int) {
  throw BadInputError(fmt::format("--decode gpu: {}; or pass --decode cpu (or auto)", WhyNoNvjpeg()));
}
GpuJpegBatches::~GpuJpegBatches() = default;
void GpuJpegBatches::StartEpoch(std::vector<int64_t>, int64_t) {}
std::optional<Batch> GpuJpegBatches::Next() { return std::nullopt; }
GpuDecodeStats GpuJpegBatches::stats() const { return {}; }
std::string GpuJpegBatches::Describe() const { return ""; }
int64_t GpuJpegBatches::MemoryBoundBytes() const { return 0; }

#else

namespace {

// One sample after the CPU side: its bytes and crop (route kGpu), or its pixels already decoded
// by the CPU path into the batch's host buffer.
struct Prepared {
  int64_t index = 0;
  int64_t label = 0;
  GpuDecodeRoute route = GpuDecodeRoute::kGpu;
  std::vector<uint8_t> bytes;
  ImageSize full;
  CropPlan plan;
};

const char* BackendName(nvjpegBackend_t backend) {
  switch (backend) {
    case NVJPEG_BACKEND_HARDWARE: return "hardware (the GPU's JPEG engines)";
    case NVJPEG_BACKEND_GPU_HYBRID: return "GPU-hybrid (Huffman decode on the GPU)";
    default: return "default";
  }
}

// Runs `work(k)` for k in [0, n) on the calling thread and threads - 1 more; rethrows the first
// exception.
template <typename Work>
void ParallelFor(int64_t n, int threads, const Work& work) {
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&] {
    for (int64_t k = next++; k < n; k = next++) {
      try {
        work(k);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int64_t>(threads, n); ++t) pool.emplace_back(run);
  run();
  for (auto& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

// nvJPEG's handle and batched-decode state, used by the producer thread alone.
class NvjpegDecoder {
 public:
  explicit NvjpegDecoder(const NvjpegLibrary& lib) : lib_(lib) {
    for (nvjpegBackend_t backend : {NVJPEG_BACKEND_HARDWARE, NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_BACKEND_DEFAULT}) {
      if (lib_.CreateEx(backend, nullptr, nullptr, 0, &handle_) == NVJPEG_STATUS_SUCCESS) {
        backend_ = backend;
        break;
      }
      handle_ = nullptr;
    }
    if (handle_ == nullptr) {
      throw BadInputError(fmt::format("--decode gpu: nvJPEG ({}) cannot start on this GPU with any backend "
                                      "(hardware, GPU-hybrid, default); check the driver, or pass --decode cpu",
                                      lib_.path));
    }
    if (lib_.JpegStateCreate(handle_, &state_) != NVJPEG_STATUS_SUCCESS) {
      lib_.Destroy(handle_);
      throw Error(ExitCode::kFailure, "--decode gpu: nvJPEG cannot create its decode state (out of device memory?)");
    }
    region_decode_ = backend_ == NVJPEG_BACKEND_HARDWARE;
  }
  ~NvjpegDecoder() {
    for (nvjpegDecodeParams_t params : params_) lib_.DecodeParamsDestroy(params);
    lib_.JpegStateDestroy(state_);
    lib_.Destroy(handle_);
  }
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  std::string Describe() const {
    return fmt::format("nvJPEG {}, {} backend, {}", lib_.version, BackendName(backend_),
                       region_decode_ ? "region-of-interest decode of each crop" : "full decode, crop on the device");
  }

  // Decodes the chunk's crops as (3, h, w) uint8 tensors on the current device and stream, or
  // returns false (nvJPEG refused the chunk: a stream its header did not show to be bad).
  bool Decode(const std::vector<const Prepared*>& chunk, cudaStream_t stream, std::vector<torch::Tensor>& crops) {
    if (region_decode_) {
      if (DecodeChunk(chunk, true, stream, crops)) return true;
      if (!DecodeChunk(chunk, false, stream, crops)) return false;
      region_decode_ = false;  // the full decode worked: this GPU or nvJPEG refuses regions
      return true;
    }
    return DecodeChunk(chunk, false, stream, crops);
  }

 private:
  bool DecodeChunk(const std::vector<const Prepared*>& chunk, bool region, cudaStream_t stream,
                   std::vector<torch::Tensor>& crops) {
    const auto n = static_cast<int>(chunk.size());
    int64_t total = 0;
    for (const Prepared* p : chunk) total += 3 * OutputHeight(*p, region) * OutputWidth(*p, region);
    torch::Tensor buffer = torch::empty({total}, torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA));
    std::vector<nvjpegImage_t> images(chunk.size());
    std::vector<const unsigned char*> data(chunk.size());
    std::vector<size_t> lengths(chunk.size());
    std::vector<torch::Tensor> planes(chunk.size());  // (3, h, w) per image
    int64_t offset = 0;
    for (size_t k = 0; k < chunk.size(); ++k) {
      const Prepared& p = *chunk[k];
      const int64_t h = OutputHeight(p, region), w = OutputWidth(p, region);
      planes[k] = buffer.narrow(0, offset, 3 * h * w).view({3, h, w});
      for (int c = 0; c < 3; ++c) {
        images[k].channel[c] = buffer.data_ptr<uint8_t>() + offset + c * h * w;
        images[k].pitch[c] = static_cast<size_t>(w);
      }
      offset += 3 * h * w;
      data[k] = p.bytes.data();
      lengths[k] = p.bytes.size();
    }
    if (initialized_for_ != n) {
      if (lib_.DecodeBatchedInitialize(handle_, state_, n, 1, NVJPEG_OUTPUT_RGB) != NVJPEG_STATUS_SUCCESS) return false;
      initialized_for_ = n;
    }
    nvjpegStatus_t status;
    if (region) {
      while (static_cast<int>(params_.size()) < n) {
        nvjpegDecodeParams_t params = nullptr;
        if (lib_.DecodeParamsCreate(handle_, &params) != NVJPEG_STATUS_SUCCESS) return false;
        lib_.DecodeParamsSetOutputFormat(params, NVJPEG_OUTPUT_RGB);
        params_.push_back(params);
      }
      for (size_t k = 0; k < chunk.size(); ++k) {
        const Window& w = chunk[k]->plan.window;
        lib_.DecodeParamsSetROI(params_[k], static_cast<int>(w.left), static_cast<int>(w.top),
                                static_cast<int>(w.width), static_cast<int>(w.height));
      }
      status = lib_.DecodeBatchedEx(handle_, state_, data.data(), lengths.data(), images.data(), params_.data(), stream);
    } else {
      status = lib_.DecodeBatched(handle_, state_, data.data(), lengths.data(), images.data(), stream);
    }
    if (status != NVJPEG_STATUS_SUCCESS) return false;
    crops.clear();
    for (size_t k = 0; k < chunk.size(); ++k) {
      const Window& w = chunk[k]->plan.window;
      crops.push_back(region ? planes[k] : planes[k].narrow(1, w.top, w.height).narrow(2, w.left, w.width));
    }
    return true;
  }

  static int64_t OutputHeight(const Prepared& p, bool region) { return region ? p.plan.window.height : p.full.height; }
  static int64_t OutputWidth(const Prepared& p, bool region) { return region ? p.plan.window.width : p.full.width; }

  const NvjpegLibrary& lib_;
  nvjpegHandle_t handle_ = nullptr;
  nvjpegJpegState_t state_ = nullptr;
  nvjpegBackend_t backend_ = NVJPEG_BACKEND_DEFAULT;
  std::atomic<bool> region_decode_{false};  // read by Describe() on other threads
  int initialized_for_ = 0;  // the batch size nvjpegDecodeBatchedInitialize was last given
  std::vector<nvjpegDecodeParams_t> params_;
};

}  // namespace

struct GpuJpegBatches::Impl {
  Impl(std::shared_ptr<const StreamingImages> source_in, torch::Device device_in, int64_t batch_size_in,
       int threads_in)
      : source(std::move(source_in)), device(device_in), batch_size(batch_size_in),
        threads(std::max(threads_in, 1)), side(source->image_size().height) {
    const c10::cuda::CUDAGuard on_device(device);
    decoder = std::make_unique<NvjpegDecoder>(OpenNvjpeg());
    side_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    std::vector<float> scale, shift;  // as BatchLoader: v * 1 / (255 stddev) - mean / stddev
    for (size_t c = 0; c < 3; ++c) {
      scale.push_back(1.0f / (255.0f * source->stddev()[c]));
      shift.push_back(-source->mean()[c] / source->stddev()[c]);
    }
    scale_t = torch::tensor(scale).view({1, 3, 1, 1}).to(device);
    shift_t = torch::tensor(shift).view({1, 3, 1, 1}).to(device);
  }
  ~Impl() { Stop(); }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    if (producer.joinable()) producer.join();
    std::lock_guard<std::mutex> lock(mutex);
    stopping = false;
    ready.clear();
    error = nullptr;
  }

  void Start(std::vector<int64_t> indices, int64_t epoch) {
    Stop();
    const auto n = static_cast<int64_t>(indices.size());
    num_batches = (n + batch_size - 1) / batch_size;
    delivered = 0;
    producer = std::thread([this, indices = std::move(indices), epoch] { Produce(indices, epoch); });
  }

  void Produce(const std::vector<int64_t>& indices, int64_t epoch) {
    try {
      for (int64_t b = 0; b < num_batches; ++b) {
        {
          std::unique_lock<std::mutex> lock(mutex);
          changed.wait(lock, [&] { return stopping || static_cast<int>(ready.size()) < kBatchesAhead; });
          if (stopping) return;
        }
        const int64_t begin = b * batch_size;
        const int64_t end = std::min<int64_t>(begin + batch_size, static_cast<int64_t>(indices.size()));
        Batch batch = Build(std::vector<int64_t>(indices.begin() + begin, indices.begin() + end), epoch);
        batch.index = b;
        std::lock_guard<std::mutex> lock(mutex);
        ready.push_back(std::move(batch));
        changed.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      error = std::current_exception();
      changed.notify_all();
    }
  }

  // Step 1 for one sample: read, parse, route; the crop plan, or the CPU path's pixels in `host`.
  void Prepare(Prepared& p, int64_t epoch, uint8_t* host) const {
    JpegHeader header;
    try {
      p.bytes = source->ReadEncoded(p.index);
      header = ReadJpegHeader(p.bytes.data(), p.bytes.size());
      p.route = RouteForGpu(header);
    } catch (const BadInputError&) {
      p.route = GpuDecodeRoute::kBadHeader;  // the CPU path reports it, or replaces it under skip
    }
    if (p.route == GpuDecodeRoute::kGpu) {
      p.full = header.size;
      p.plan = source->PlanCrop(p.index, epoch, header.size);
      p.label = source->label(p.index);
    } else {
      p.bytes.clear();
      p.label = source->Load(p.index, epoch, host);
    }
  }

  Batch Build(const std::vector<int64_t>& indices, int64_t epoch) {
    const auto n = static_cast<int64_t>(indices.size());
    const int64_t sample_bytes = 3 * side * side;
    torch::Tensor host = torch::empty({n, 3, side, side}, torch::kUInt8);  // the CPU path's samples
    uint8_t* host_pixels = host.data_ptr<uint8_t>();
    std::vector<Prepared> prepared(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) prepared[static_cast<size_t>(k)].index = indices[static_cast<size_t>(k)];
    ParallelFor(n, threads, [&](int64_t k) { Prepare(prepared[static_cast<size_t>(k)], epoch, host_pixels + k * sample_bytes); });

    const c10::cuda::CUDAStreamGuard on_side(side_stream);
    torch::Tensor images = torch::empty({n, 3, side, side}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    std::vector<int64_t> on_cpu;  // positions decoded by the CPU path
    std::vector<size_t> gpu;
    for (int64_t k = 0; k < n; ++k) {
      const Prepared& p = prepared[static_cast<size_t>(k)];
      if (p.route == GpuDecodeRoute::kGpu) {
        gpu.push_back(static_cast<size_t>(k));
      } else {
        on_cpu.push_back(k);
        Count(RouteName(p.route));
      }
    }
    DecodeOnDevice(prepared, gpu, epoch, images, host_pixels, on_cpu);
    if (!on_cpu.empty()) {
      const torch::Tensor positions = torch::tensor(on_cpu, torch::kInt64);
      images.index_copy_(0, positions.to(device), host.index_select(0, positions).to(device).to(torch::kFloat32));
    }
    images.mul_(scale_t).add_(shift_t);
    std::vector<int64_t> labels;
    for (const Prepared& p : prepared) labels.push_back(p.label);
    Batch batch;
    batch.images = images;
    batch.labels = torch::tensor(labels, torch::kInt64).to(device);
    side_stream.synchronize();  // the batch is whole; the chunks' buffers and bytes may go
    return batch;
  }

  // Step 2: the kGpu samples at positions `gpu`, in chunks of at most kDecodeBufferBytes of
  // output; a refused chunk goes to the CPU path (its positions appended to `on_cpu`).
  void DecodeOnDevice(std::vector<Prepared>& prepared, const std::vector<size_t>& gpu, int64_t epoch,
                      torch::Tensor& images, uint8_t* host_pixels, std::vector<int64_t>& on_cpu) {
    size_t at = 0;
    while (at < gpu.size()) {
      std::vector<const Prepared*> chunk;
      std::vector<size_t> positions;
      int64_t bytes = 0;
      while (at < gpu.size()) {
        const Prepared& p = prepared[gpu[at]];
        const int64_t need = 3 * p.full.height * p.full.width;  // the full decode's, an upper bound
        if (!chunk.empty() && bytes + need > kDecodeBufferBytes) break;
        chunk.push_back(&p);
        positions.push_back(gpu[at++]);
        bytes += need;
      }
      if (DecodeChunk(chunk, positions, images)) continue;
      // One image nvJPEG refuses fails its whole chunk: the others are decoded one by one.
      std::vector<size_t> refused;
      for (size_t j = 0; j < chunk.size(); ++j) {
        if (chunk.size() == 1 || !DecodeChunk({chunk[j]}, {positions[j]}, images)) refused.push_back(positions[j]);
      }
      ParallelFor(static_cast<int64_t>(refused.size()), threads, [&](int64_t j) {
        const size_t position = refused[static_cast<size_t>(j)];
        Prepared& p = prepared[position];
        p.label = source->Load(p.index, epoch, host_pixels + static_cast<int64_t>(position) * 3 * side * side);
      });
      for (size_t position : refused) {
        on_cpu.push_back(static_cast<int64_t>(position));
        Count("nvjpeg_error");
      }
    }
  }

  // Decodes, crops and resizes `chunk` into `images` at `positions`; false if nvJPEG refused it.
  bool DecodeChunk(const std::vector<const Prepared*>& chunk, const std::vector<size_t>& positions,
                   torch::Tensor& images) {
    std::vector<torch::Tensor> crops;
    if (!decoder->Decode(chunk, side_stream.stream(), crops)) return false;
    for (size_t j = 0; j < chunk.size(); ++j) {
      images[static_cast<int64_t>(positions[j])].copy_(ResizeCrop(crops[j], chunk[j]->plan.flip));
    }
    Add(&GpuDecodeStats::gpu_images, static_cast<int64_t>(chunk.size()));
    return true;
  }

  // A (3, h, w) uint8 crop as (3, side, side) float of whole 8-bit levels, mirrored if `flip`.
  torch::Tensor ResizeCrop(const torch::Tensor& crop, bool flip) const {
    torch::Tensor x = crop.unsqueeze(0).to(torch::kFloat32);  // (1, 3, h, w)
    if (crop.size(1) != side || crop.size(2) != side) {
      namespace F = torch::nn::functional;
      x = F::interpolate(x, F::InterpolateFuncOptions()
                                .size(std::vector<int64_t>{side, side})
                                .mode(torch::kBilinear)
                                .align_corners(false)
                                .antialias(true));
      x = x.round_().clamp_(0, 255);
    }
    if (flip) x = x.flip({3});
    return x[0];
  }

  void Count(const std::string& reason) {
    std::lock_guard<std::mutex> lock(stats_mutex);
    ++stats.cpu_fallbacks;
    ++stats.fallback_reasons[reason];
  }
  void Add(int64_t GpuDecodeStats::*field, int64_t n) {
    std::lock_guard<std::mutex> lock(stats_mutex);
    stats.*field += n;
  }

  std::optional<Batch> Next() {
    std::unique_lock<std::mutex> lock(mutex);
    if (delivered >= num_batches) return std::nullopt;
    changed.wait(lock, [&] { return error || !ready.empty(); });
    if (error) std::rethrow_exception(error);
    Batch batch = std::move(ready.front());
    ready.pop_front();
    ++delivered;
    changed.notify_all();
    lock.unlock();
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device.index());
    c10::cuda::CUDACachingAllocator::recordStream(batch.images.storage().data_ptr(), compute);
    c10::cuda::CUDACachingAllocator::recordStream(batch.labels.storage().data_ptr(), compute);
    return batch;
  }

  const std::shared_ptr<const StreamingImages> source;
  const torch::Device device;
  const int64_t batch_size;
  const int threads;
  const int64_t side;
  std::unique_ptr<NvjpegDecoder> decoder;
  c10::cuda::CUDAStream side_stream = c10::cuda::getDefaultCUDAStream();
  torch::Tensor scale_t, shift_t;  // (1, 3, 1, 1) on the device

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Batch> ready;
  std::exception_ptr error;
  bool stopping = false;
  int64_t num_batches = 0;
  int64_t delivered = 0;
  std::thread producer;

  mutable std::mutex stats_mutex;
  GpuDecodeStats stats;
};

GpuJpegBatches::GpuJpegBatches(std::shared_ptr<const StreamingImages> source, torch::Device device,
                               int64_t batch_size, int num_workers)
    : impl_(std::make_unique<Impl>(std::move(source), device, batch_size, num_workers)) {}

GpuJpegBatches::~GpuJpegBatches() = default;

void GpuJpegBatches::StartEpoch(std::vector<int64_t> indices, int64_t epoch) { impl_->Start(std::move(indices), epoch); }

std::optional<Batch> GpuJpegBatches::Next() { return impl_->Next(); }

GpuDecodeStats GpuJpegBatches::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  return impl_->stats;
}

std::string GpuJpegBatches::Describe() const { return impl_->decoder->Describe(); }

int64_t GpuJpegBatches::MemoryBoundBytes() const {
  const int64_t batch_bytes = impl_->batch_size * 3 * impl_->side * impl_->side * 4;
  // Waiting in the queue, being built, and the one the training step holds.
  return (kBatchesAhead + 2) * batch_bytes + std::max(kDecodeBufferBytes, 3 * kMaxGpuPixels);
}

#endif

}  // namespace mgpu
