#include "data/gpu_jpeg_batches.h"

#include <fmt/format.h>

#include "common/status.h"
#include "data/batch_loader.h"
#include "data/nvjpeg_library.h"

#if defined(MGPU_HAVE_NVJPEG) && defined(MGPU_WITH_CUDA)
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <mutex>
#include <thread>
#include <tuple>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "data/crop_resize.h"
#include "data/jpeg_header.h"
#include "data/nvjpeg_decoder.h"
#endif

namespace mgpu {

#if !(defined(MGPU_HAVE_NVJPEG) && defined(MGPU_WITH_CUDA))

struct GpuJpegBatches::Impl {};

GpuJpegBatches::GpuJpegBatches(std::shared_ptr<const StreamingImages>, torch::Device, int64_t, int, GpuDecoderChoice,
                               CpuAssist, torch::MemoryFormat) {
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
  bool assisted = false;  // route kGpu, but decoded by the CPU path beside the device (CpuAssist)
};

// A batch after the CPU side: every sample's Prepared, and the CPU path's pixels.
struct PreparedBatch {
  std::vector<Prepared> samples;
  torch::Tensor host;  // (B, 3, side, side) uint8: the samples of other routes than kGpu, and assisted ones
};

// A batch whose CPU side runs on its own threads (the task given to the constructor), which may
// go on decoding samples until Take() or the destructor sets `stop`.
class PendingBatch {
 public:
  template <typename Task>
  explicit PendingBatch(Task task) : result_(std::async(std::launch::async, std::move(task), &stop_)) {}
  ~PendingBatch() {
    stop_ = true;
    if (result_.valid()) result_.wait();
  }
  PendingBatch(const PendingBatch&) = delete;
  PendingBatch& operator=(const PendingBatch&) = delete;

  // Asks the threads to take no further sample; returns without waiting.
  void StopAssist() { stop_ = true; }
  // The batch, once its threads are done (rethrows what they threw).
  PreparedBatch Take() {
    stop_ = true;
    return result_.get();
  }

 private:
  std::atomic<bool> stop_{false};
  std::future<PreparedBatch> result_;
};

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

}  // namespace

struct GpuJpegBatches::Impl {
  Impl(std::shared_ptr<const StreamingImages> source_in, torch::Device device_in, int64_t batch_size_in,
       int threads_in, GpuDecoderChoice choice, CpuAssist assist_in, torch::MemoryFormat memory_format_in)
      : source(std::move(source_in)), device(device_in), batch_size(batch_size_in),
        threads(std::max(threads_in, 1)), side(source->image_size().height), assist(assist_in),
        memory_format(memory_format_in) {
    const c10::cuda::CUDAGuard on_device(device);
    OpenDecoder(choice);
    stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    decode_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    // As BatchLoader normalizes.
    const PixelNormalization normalization = PixelNormalization::Of(source->mean(), source->stddev());
    std::tie(scale_t, shift_t) = normalization.On(device);
    for (size_t c = 0; c < scaling.scale.size(); ++c) {
      scaling.scale[c] = normalization.scale.at(c);
      scaling.shift[c] = normalization.shift.at(c);
    }
  }
  ~Impl() { Stop(); }

  // The first backend of hardware, GPU-hybrid, default that starts (kCudaOnly: of the last two).
  void OpenDecoder(GpuDecoderChoice choice) {
    const NvjpegLibrary& lib = OpenNvjpeg();
    std::vector<nvjpegBackend_t> backends{NVJPEG_BACKEND_GPU_HYBRID, NVJPEG_BACKEND_DEFAULT};
    if (choice == GpuDecoderChoice::kFastest) backends.insert(backends.begin(), NVJPEG_BACKEND_HARDWARE);
    for (nvjpegBackend_t backend : backends) {
      if ((decoder = NvjpegDecoder::TryCreate(lib, backend, static_cast<int>(kChunkImages)))) break;
    }
    if (decoder == nullptr) {
      throw BadInputError(fmt::format("--decode gpu: nvJPEG ({}) cannot start on this GPU with any backend "
                                      "(hardware, GPU-hybrid, default); check the driver, or pass --decode cpu",
                                      lib.path));
    }
    version = lib.version;
  }

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

  // Batch b + 1's CPU side runs (on its own threads) while batch b is on the device: first every
  // sample's preparation, then the CPU assist until batch b's decodes are enqueued.
  // Its threads make their CUDA calls (nvJPEG's, whose state belongs to the device current at its
  // creation, and the pinned batches' allocations and frees) with the run's device current: a new
  // thread starts on device 0.
  void Produce(const std::vector<int64_t>& indices, int64_t epoch) {
    const c10::cuda::CUDAGuard on_device(device);
    try {
      auto prepare = [&](int64_t b) {
        const int64_t begin = b * batch_size;
        const int64_t end = std::min<int64_t>(begin + batch_size, static_cast<int64_t>(indices.size()));
        std::vector<int64_t> slice(indices.begin() + begin, indices.begin() + end);
        return std::make_unique<PendingBatch>([this, slice = std::move(slice), epoch](const std::atomic<bool>* stop) {
          const c10::cuda::CUDAGuard on_device(device);
          PreparedBatch batch = PrepareBatch(slice, epoch);
          AssistOnCpu(batch, epoch, *stop);
          return batch;
        });
      };
      std::unique_ptr<PendingBatch> ahead = prepare(0);
      for (int64_t b = 0; b < num_batches; ++b) {
        PreparedBatch prepared = ahead->Take();
        ahead = b + 1 < num_batches ? prepare(b + 1) : nullptr;
        Batch batch = Assemble(prepared, epoch, ahead.get());
        batch.index = b;
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return stopping || static_cast<int>(ready.size()) < kBatchesAhead; });
        if (stopping) return;
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

  PreparedBatch PrepareBatch(const std::vector<int64_t>& indices, int64_t epoch) const {
    const auto n = static_cast<int64_t>(indices.size());
    // Pinned: the copy to the device is asynchronous and costs the producer no CPU time (a gather
    // on the CPU and a pageable copy grew with the assisted samples, which lengthened the next
    // batch's assist: a feedback loop that left the device nearly idle).
    PreparedBatch batch{std::vector<Prepared>(static_cast<size_t>(n)),
                        torch::empty({n, 3, side, side}, torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(true))};
    uint8_t* host_pixels = batch.host.data_ptr<uint8_t>();
    for (int64_t k = 0; k < n; ++k) batch.samples[static_cast<size_t>(k)].index = indices[static_cast<size_t>(k)];
    ParallelFor(n, threads, [&](int64_t k) {
      Prepare(batch.samples[static_cast<size_t>(k)], epoch, host_pixels + k * 3 * side * side);
    });
    return batch;
  }

  // The CPU assist: until `stop`, the threads decode route-kGpu samples by the CPU path, from the
  // batch's end (kEverySample: all of them, for tests), from the bytes Prepare read. The device,
  // which takes the rest, is the faster decoder, but a blocking nvJPEG call at a time; threads
  // that would wait for it decode beside it instead (1x H100, ResNet-18 at 224: the engines alone
  // fed 9,900 img/s of 11,900). A sample the CPU path cannot decode (libjpeg refuses a truncated
  // stream that nvJPEG may take) is left to the device, so that whether a run fails or skips an
  // image never depends on which decoder reached it first.
  void AssistOnCpu(PreparedBatch& batch, int64_t epoch, const std::atomic<bool>& stop) const {
    if (assist == CpuAssist::kOff) return;
    const auto n = static_cast<int64_t>(batch.samples.size());
    uint8_t* host_pixels = batch.host.data_ptr<uint8_t>();
    std::atomic<int64_t> next{n - 1};
    ParallelFor(threads, threads, [&](int64_t) {
      for (int64_t k = next--; k >= 0 && (assist == CpuAssist::kEverySample || !stop); k = next--) {
        Prepared& p = batch.samples[static_cast<size_t>(k)];
        if (p.route != GpuDecodeRoute::kGpu) continue;
        p.assisted = source->TryDecode(p.index, epoch, p.bytes, host_pixels + k * 3 * side * side).empty();
      }
    });
  }

  // Step 2: the batch on the device, whole when this returns.
  // `next`'s CPU assist stops once this batch's decodes are enqueued.
  Batch Assemble(PreparedBatch& prepared, int64_t epoch, PendingBatch* next) {
    const auto n = static_cast<int64_t>(prepared.samples.size());
    const c10::cuda::CUDAStreamGuard on_side(stream);
    const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device).memory_format(memory_format);
    torch::Tensor images = torch::empty({n, 3, side, side}, options);
    std::vector<int64_t> on_cpu;  // positions decoded by the CPU path
    std::vector<size_t> gpu;
    int64_t assisted = 0;
    for (int64_t k = 0; k < n; ++k) {
      const Prepared& p = prepared.samples[static_cast<size_t>(k)];
      if (p.route == GpuDecodeRoute::kGpu && !p.assisted) {
        gpu.push_back(static_cast<size_t>(k));
        continue;
      }
      on_cpu.push_back(k);
      if (p.assisted) {
        ++assisted;
      } else {
        Count(RouteName(p.route));
      }
    }
    Add(&GpuDecodeStats::cpu_assisted, assisted);
    CopyFromHost(prepared, on_cpu, images);
    const std::vector<int64_t> refused = DecodeOnDevice(prepared, gpu, epoch, images);
    if (next != nullptr) next->StopAssist();
    CopyFromHost(prepared, refused, images);
    std::vector<int64_t> labels;
    for (const Prepared& p : prepared.samples) labels.push_back(p.label);
    Batch batch;
    batch.images = images;
    batch.labels = torch::tensor(labels, torch::kInt64).to(device);
    ReleaseDecodedChunks();  // the batch is whole (it waited for every decode)
    return batch;
  }

  // Once the side stream has run everything enqueued on it (the resizes that read them), the
  // decoded chunks go back to the allocator.
  void ReleaseDecodedChunks() {
    WaitForStream(stream.stream());
    decoded_chunks.clear();
    decoded_bytes = 0;
  }

  // The CPU path's pixels of the samples at `positions` into `images`, normalized: the whole
  // pinned host batch copied asynchronously, gathered on the device.
  void CopyFromHost(const PreparedBatch& prepared, const std::vector<int64_t>& positions, torch::Tensor& images) const {
    if (positions.empty()) return;
    const torch::Tensor where = torch::tensor(positions, torch::kInt64).pin_memory().to(device, /*non_blocking=*/true);
    const torch::Tensor host = prepared.host.to(device, /*non_blocking=*/true);  // (B, 3, S, S) uint8
    images.index_copy_(0, where, host.index_select(0, where).to(torch::kFloat32).mul_(scale_t).add_(shift_t));
  }

  // The kGpu samples at `gpu`, in chunks of at most kChunkImages images and kDecodeBufferBytes
  // of output, decoded one after the other on the decode stream and resized (rounded and flipped
  // too) on the side stream. A refused chunk is retried image by image; the images nvJPEG refuses
  // are decoded by the CPU path into the host buffer, and their positions returned.
  std::vector<int64_t> DecodeOnDevice(PreparedBatch& prepared, const std::vector<size_t>& gpu, int64_t epoch,
                                      torch::Tensor& images) {
    std::vector<size_t> refused;
    for (const std::vector<size_t>& chunk : SplitIntoChunks(prepared.samples, gpu)) {
      if (DecodeChunk(prepared.samples, chunk, images)) continue;
      for (size_t position : chunk) {
        if (chunk.size() == 1 || !DecodeChunk(prepared.samples, {position}, images)) refused.push_back(position);
      }
    }
    return DecodeOnCpu(prepared, refused, epoch);
  }

  std::vector<std::vector<size_t>> SplitIntoChunks(const std::vector<Prepared>& samples,
                                                   const std::vector<size_t>& gpu) const {
    std::vector<std::vector<size_t>> chunks;
    int64_t bytes = 0;
    for (size_t position : gpu) {
      const Prepared& p = samples[position];
      const int64_t need = 3 * p.full.height * p.full.width;  // the full decode's, an upper bound
      if (chunks.empty() || static_cast<int64_t>(chunks.back().size()) >= kChunkImages ||
          bytes + need > kDecodeBufferBytes) {
        chunks.emplace_back();
        bytes = 0;
      }
      chunks.back().push_back(position);
      bytes += need;
    }
    return chunks;
  }

  // The CPU path for the images nvJPEG refused, counted as "nvjpeg_error".
  std::vector<int64_t> DecodeOnCpu(PreparedBatch& prepared, const std::vector<size_t>& refused, int64_t epoch) {
    uint8_t* host_pixels = prepared.host.data_ptr<uint8_t>();
    ParallelFor(static_cast<int64_t>(refused.size()), threads, [&](int64_t j) {
      const size_t position = refused[static_cast<size_t>(j)];
      Prepared& p = prepared.samples[position];
      p.label = source->Load(p.index, epoch, host_pixels + static_cast<int64_t>(position) * 3 * side * side);
    });
    std::vector<int64_t> positions;
    for (size_t position : refused) {
      positions.push_back(static_cast<int64_t>(position));
      Count("nvjpeg_error");
    }
    return positions;
  }

  // Decodes the samples at `positions` on the decode stream and resizes each crop into `images`
  // on the side stream (the current one), one launch for the chunk; false if nvJPEG refused it.
  bool DecodeChunk(const std::vector<Prepared>& samples, const std::vector<size_t>& positions,
                   torch::Tensor& images) {
    std::vector<EncodedCrop> chunk;
    for (size_t position : positions) {
      const Prepared& p = samples[position];
      chunk.push_back(EncodedCrop{p.bytes.data(), p.bytes.size(), p.full, p.plan.window});
    }
    if (decoded_bytes > kRetainedChunkBytes) ReleaseDecodedChunks();
    DecodedChunk decoded;
    {
      const c10::cuda::CUDAStreamGuard on_decode(decode_stream);  // its output from the decode stream's pool
      if (!decoder->Decode(chunk, decode_stream.stream(), decoded)) return false;
    }
    at::cuda::CUDAEvent done;
    done.record(decode_stream);
    done.block(stream);
    decoded_chunks.push_back(decoded.pixels);
    decoded_bytes += static_cast<int64_t>(decoded.pixels.nbytes());
    std::vector<kernels::CropResizeJob> jobs;
    for (size_t j = 0; j < positions.size(); ++j) {
      const DecodedChunk::Place& place = decoded.places[j];
      jobs.push_back(kernels::CropResizeJob{
          place.offset, static_cast<int32_t>(place.height), static_cast<int32_t>(place.width),
          static_cast<int32_t>(place.crop.top), static_cast<int32_t>(place.crop.left),
          static_cast<int32_t>(place.crop.height), static_cast<int32_t>(place.crop.width),
          static_cast<int32_t>(positions[j]), samples[positions[j]].plan.flip ? 1 : 0});
    }
    ResizeCropsInto(decoded.pixels, jobs, images, scaling);
    Add(&GpuDecodeStats::gpu_images, static_cast<int64_t>(positions.size()));
    return true;
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

  std::string Describe() const {
    return fmt::format("nvJPEG {}, {}, CPU assist {}", version, decoder->Describe(),
                       assist == CpuAssist::kOff ? "off" : assist == CpuAssist::kEverySample ? "on every sample" : "on");
  }

  const std::shared_ptr<const StreamingImages> source;
  const torch::Device device;
  const int64_t batch_size;
  const int threads;
  const int64_t side;
  const CpuAssist assist;
  const torch::MemoryFormat memory_format;  // of the batches
  std::unique_ptr<NvjpegDecoder> decoder;
  c10::cuda::CUDAStream stream = c10::cuda::getDefaultCUDAStream();  // the side stream: resizes and the rest
  // nvJPEG's calls only: the hardware backend's call waits for the work enqueued before it on its
  // stream, so on the side stream each chunk's decode would wait for the last chunk's resizes.
  c10::cuda::CUDAStream decode_stream = c10::cuda::getDefaultCUDAStream();
  // The decoded chunks, kept until the side stream has read them (to the batch's end, or past
  // kRetainedChunkBytes): nvJPEG writes at the call, not in stream order, so a buffer must not go
  // back to the allocator while the side stream may still read it.
  std::vector<torch::Tensor> decoded_chunks;
  int64_t decoded_bytes = 0;  // theirs
  std::string version;
  torch::Tensor scale_t, shift_t;  // (1, 3, 1, 1) on the device: the CPU path's samples' normalization
  LevelScaling scaling;             // the same, for the resizes

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
                               int64_t batch_size, int num_workers, GpuDecoderChoice choice, CpuAssist assist,
                               torch::MemoryFormat memory_format)
    : impl_(std::make_unique<Impl>(std::move(source), device, batch_size, num_workers, choice, assist,
                                   memory_format)) {}

GpuJpegBatches::~GpuJpegBatches() = default;

void GpuJpegBatches::StartEpoch(std::vector<int64_t> indices, int64_t epoch) { impl_->Start(std::move(indices), epoch); }

std::optional<Batch> GpuJpegBatches::Next() { return impl_->Next(); }

GpuDecodeStats GpuJpegBatches::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mutex);
  return impl_->stats;
}

std::string GpuJpegBatches::Describe() const { return impl_->Describe(); }

int64_t GpuJpegBatches::MemoryBoundBytes() const {
  const int64_t batch_bytes = impl_->batch_size * 3 * impl_->side * impl_->side * 4;
  // Waiting in the queue, being built, the one the training step holds, and the CPU path's
  // samples on their way in (uint8 and float); the decoded chunks kept (at most
  // kRetainedChunkBytes before a decode, one chunk more after it) and, where the build has no
  // resize kernel, one crop's float copy (four chunks' bytes at most).
  const int64_t chunk = std::max(kDecodeBufferBytes, 3 * kMaxGpuPixels);
  return (kBatchesAhead + 4) * batch_bytes + kRetainedChunkBytes + 5 * chunk;
}

#endif

}  // namespace mgpu
