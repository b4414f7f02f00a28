// Turns an epoch's list of sample indices into normalized batches, handed out in order. The
// samples come from a SampleSource (data/sample_source.h): decoded images held in memory, or
// files decoded as they are read (--data-loading stream).
//
// With num_workers = 0 the caller's thread builds each batch when it asks for it (the time it
// takes is the epoch's data-wait time). With N > 0, N threads build batches ahead and Next()
// hands them out in index order. The threads share each batch: it is split into tasks of up to
// kSamplesPerTask samples, taken in order by whichever thread is free, so that a batch is ready
// as soon as possible and the memory held does not grow with N times the batch size (ImageNet's
// 256 x 3 x 224 x 224 float batch is 154 MB). At most
//   capacity = max(1, ceil(N * prefetch_per_worker * task samples / batch_size))
// batches are allocated ahead of the caller, built or being built: N * prefetch_per_worker
// tasks' worth of samples, in whole batches. Pageable batches' image buffers are reused once the
// caller holds none of a batch (no tensor or view of it), so up to max(capacity, 1) +
// kSpareBatches buffers stay allocated between batches. A batch's contents depend only on the index list
// and the epoch (which keys the augmentation's random draws), never on the number of workers or
// their timing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "data/augment.h"
#include "data/image_dataset.h"
#include "data/sample_source.h"

namespace mgpu {

// What a batch's images hold.
enum class BatchPixels {
  kNormalized,  // float32, normalized with the data set's mean and stddev
  // uint8, the samples' pixels after augmentation, for a consumer that normalizes them where it
  // uses them (DevicePrefetcher, on the GPU): a quarter of the bytes for the loader threads to
  // write, to pin and to copy, and no per-pixel arithmetic on the CPU, as PyTorch's fastest input
  // pipelines do (uint8 from the workers, normalization on the GPU).
  kRaw,
};

// The per-channel affine map from uint8 pixels to a normalized batch: v * scale + shift, with
// scale = 1 / (255 stddev) and shift = -mean / stddev, one multiply and one add in float32 (each
// rounded, as Fill and LibTorch's mul and add_ compute it, so both places give the same bits).
// Every path that normalizes (the loader, DevicePrefetcher, DeviceResidentBatches, --decode gpu)
// takes its constants from here.
struct PixelNormalization {
  // Of a data set's per-channel mean and stddev, on the [0, 1] pixel scale.
  static PixelNormalization Of(const std::vector<float>& mean, const std::vector<float>& stddev);
  // {scale, shift} as (1, C, 1, 1) float32 tensors on `device`: images.mul(scale).add_(shift).
  std::pair<torch::Tensor, torch::Tensor> On(const torch::Device& device) const;

  std::vector<float> scale;
  std::vector<float> shift;
};

struct LoaderOptions {
  int64_t batch_size = 64;
  int num_workers = 0;
  int prefetch_per_worker = 2;
  bool pin_memory = false;  // page-locked batches, for non-blocking copies to a GPU
  // The ImageDataset constructor only: applied to each sample's uint8 pixels before
  // normalization; nullptr: none. Batches have its OutputSize(). A SampleSource applies its own.
  std::shared_ptr<const Augmentation> augmentation = nullptr;
  BatchPixels pixels = BatchPixels::kNormalized;
};

struct Batch {
  int64_t index = 0;      // position of the batch within its epoch
  // (B, C, H, W) float32, normalized with the data set's mean/stddev; uint8 from a loader of
  // BatchPixels::kRaw until DevicePrefetcher normalizes it.
  torch::Tensor images;
  torch::Tensor labels;   // (B) int64
  // (B) int64 on the device, set instead of images and labels by a source that leaves the
  // gathering to the training step (DeviceResidentBatches::DeferGather).
  torch::Tensor sample_indices;

  int64_t size() const { return sample_indices.defined() ? sample_indices.size(0) : labels.size(0); }
};

class BatchLoader {
 public:
  // `dataset` must outlive the loader. Throws std::invalid_argument for batch_size < 1 or
  // num_workers < 0, and mgpu::Error (exit code 1) naming --num-workers when the system refuses
  // to start a worker thread (none is left running).
  BatchLoader(const ImageDataset& dataset, LoaderOptions options);
  // Batches of `samples`' pixels; options.augmentation must be nullptr (the source transforms).
  BatchLoader(std::shared_ptr<const SampleSource> samples, LoaderOptions options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // Starts a pass over `indices`; an unfinished previous pass is abandoned. The last batch may
  // be smaller than batch_size. `epoch` keys the augmentation's random draws.
  void StartEpoch(std::vector<int64_t> indices, int64_t epoch = 0);
  // The next batch of the pass, or nullopt once it is done. Rethrows a worker's exception.
  std::optional<Batch> Next();
  int64_t batches_in_epoch() const { return num_batches_; }
  // Samples per task of a worker thread (fewer in a smaller batch).
  static constexpr int64_t kSamplesPerTask = 32;
  // Built batches waiting to be handed out: at most capacity().
  int64_t prefetched() const;
  // Batches allocated ahead of the caller (see above); 0 without worker threads.
  int64_t capacity() const { return capacity_; }
  // Pageable image buffers allocated so far; a batch whose buffer is reused adds none.
  int64_t image_buffers_allocated() const;
  const LoaderOptions& options() const { return options_; }
  // How a batch of BatchPixels::kRaw becomes a normalized one.
  const PixelNormalization& normalization() const { return normalization_; }

 private:
  struct Building {
    Batch batch;
    int64_t tasks_left = 0;
  };
  int64_t BatchCount(int64_t batch_index) const;  // samples in the batch
  Batch Allocate(int64_t batch_index) const;
  // A pageable (count, C, H, W) image buffer: a spare one nobody else holds, else a new one, kept
  // as a spare while there is room (kSpareBatches beyond capacity()) or in place of a free spare
  // of another shape.
  torch::Tensor ImageBuffer(int64_t count) const;
  torch::ScalarType ImageDtype() const;  // of options_.pixels
  // Loads the batch's samples [begin, end) into it, normalized unless options_.pixels is kRaw.
  void Fill(const std::vector<int64_t>& indices, int64_t epoch, Batch& batch, int64_t begin, int64_t end) const;
  void WorkerLoop();
  void StartWorkers();  // options_.num_workers threads, or none and mgpu::Error
  void StopWorkers();   // joins every worker thread

  const std::shared_ptr<const SampleSource> samples_;
  const LoaderOptions options_;
  PixelNormalization normalization_;
  ImageSize out_size_;        // the batches' (H, W), after augmentation
  int64_t task_samples_ = 0;
  int64_t capacity_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable work_available_;
  std::condition_variable batch_ready_;
  std::shared_ptr<const std::vector<int64_t>> indices_;
  int64_t epoch_ = 0;
  uint64_t generation_ = 0;       // bumped by StartEpoch; stale work is dropped
  int64_t num_batches_ = 0;
  int64_t next_to_build_ = 0;   // the batch whose tasks are being handed out
  int64_t next_task_ = 0;       // its next task
  int64_t next_to_deliver_ = 0;
  std::map<int64_t, Building> building_;  // allocated, some tasks not done
  std::map<int64_t, Batch> ready_;
  std::exception_ptr worker_error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;

  // Pageable batches' image buffers, reused once the caller has dropped a batch: a new 154 MB
  // buffer costs the kernel about 37,000 page faults, each a page to zero and map, then an
  // unmapping (a quarter of a core's loading time: perf on the 2-core VM, 2026-11-26). Pinned
  // buffers are cached by the CUDA host allocator instead.
  static constexpr int64_t kSpareBatches = 3;
  mutable std::mutex spare_mutex_;  // not mutex_: Allocate runs with and without it held
  mutable std::vector<torch::Tensor> spare_images_;
  mutable int64_t image_buffers_allocated_ = 0;  // guarded by spare_mutex_
};

}  // namespace mgpu
