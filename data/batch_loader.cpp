#include "data/batch_loader.h"

#include <algorithm>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

// The options once their augmentation has moved into the sample source.
LoaderOptions WithoutAugmentation(LoaderOptions options) {
  options.augmentation = nullptr;
  return options;
}

// The spare list's handle is the tensor's only one, and that tensor its storage's only user: no
// batch, view or step holds the buffer, and none can take it but through the list.
bool HeldByTheListAlone(const torch::Tensor& spare) {
  return spare.use_count() == 1 && spare.storage().use_count() == 1;
}

}  // namespace

PixelNormalization PixelNormalization::Of(const std::vector<float>& mean, const std::vector<float>& stddev) {
  PixelNormalization normalization;
  for (size_t c = 0; c < mean.size(); ++c) {
    normalization.scale.push_back(1.0f / (255.0f * stddev[c]));
    normalization.shift.push_back(-mean[c] / stddev[c]);
  }
  return normalization;
}

std::pair<torch::Tensor, torch::Tensor> PixelNormalization::On(const torch::Device& device) const {
  const auto channel = [&](const std::vector<float>& values) {
    return torch::tensor(values, torch::kFloat32).reshape({1, -1, 1, 1}).to(device);
  };
  return {channel(scale), channel(shift)};
}

BatchLoader::BatchLoader(const ImageDataset& dataset, LoaderOptions options)
    : BatchLoader(std::make_shared<const InMemorySamples>(dataset, options.augmentation),
                  WithoutAugmentation(options)) {}

BatchLoader::BatchLoader(std::shared_ptr<const SampleSource> samples, LoaderOptions options)
    : samples_(std::move(samples)), options_(std::move(options)) {
  if (options_.batch_size < 1) throw std::invalid_argument("batch size must be at least 1");
  if (options_.num_workers < 0) throw std::invalid_argument("num_workers must be >= 0");
  if (options_.augmentation) {
    throw std::invalid_argument("a SampleSource applies its own augmentation; LoaderOptions' must be nullptr");
  }
  normalization_ = PixelNormalization::Of(samples_->mean(), samples_->stddev());
  out_size_ = samples_->image_size();
  task_samples_ = std::min(kSamplesPerTask, options_.batch_size);
  if (options_.num_workers > 0) {
    const int64_t ahead = static_cast<int64_t>(options_.num_workers) * std::max(options_.prefetch_per_worker, 1) *
                          task_samples_;
    capacity_ = std::max<int64_t>(1, (ahead + options_.batch_size - 1) / options_.batch_size);
  }
  StartWorkers();
}

void BatchLoader::StartWorkers() {
  try {
    for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  } catch (const std::system_error& e) {
    // The threads already started must be joined: a joinable std::thread destroyed with the
    // half-made loader would call std::terminate.
    const size_t started = workers_.size();
    StopWorkers();
    throw Error(ExitCode::kFailure,
                fmt::format("cannot start loader thread {} of {} (--num-workers): {}; the system refuses more "
                            "threads (see `ulimit -u` and the container's pids limit): use fewer --num-workers",
                            started + 1, options_.num_workers, e.what()));
  }
}

void BatchLoader::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_available_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

BatchLoader::~BatchLoader() { StopWorkers(); }

void BatchLoader::StartEpoch(std::vector<int64_t> indices, int64_t epoch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    epoch_ = epoch;
    num_batches_ =
        (static_cast<int64_t>(indices.size()) + options_.batch_size - 1) / options_.batch_size;
    indices_ = std::make_shared<const std::vector<int64_t>>(std::move(indices));
    next_to_build_ = 0;
    next_task_ = 0;
    next_to_deliver_ = 0;
    building_.clear();
    ready_.clear();
    worker_error_ = nullptr;
  }
  work_available_.notify_all();
}

int64_t BatchLoader::prefetched() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(ready_.size());
}

std::optional<Batch> BatchLoader::Next() {
  if (workers_.empty()) {
    if (next_to_deliver_ >= num_batches_) return std::nullopt;
    Batch batch = Allocate(next_to_deliver_);
    Fill(*indices_, epoch_, batch, 0, BatchCount(next_to_deliver_));
    ++next_to_deliver_;
    return batch;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (next_to_deliver_ >= num_batches_) return std::nullopt;
  batch_ready_.wait(lock, [this] { return worker_error_ || ready_.count(next_to_deliver_) > 0; });
  if (worker_error_) std::rethrow_exception(worker_error_);
  auto it = ready_.find(next_to_deliver_);
  Batch batch = std::move(it->second);
  ready_.erase(it);
  ++next_to_deliver_;
  lock.unlock();
  work_available_.notify_all();
  return batch;
}

void BatchLoader::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_available_.wait(lock, [&] {
      return stopping_ || (next_to_build_ < num_batches_ && next_to_build_ < next_to_deliver_ + capacity_);
    });
    if (stopping_) return;
    const int64_t batch_index = next_to_build_;
    const int64_t count = BatchCount(batch_index);
    const int64_t begin = next_task_ * task_samples_;
    const int64_t end = std::min(begin + task_samples_, count);
    if (next_task_++ == 0) {
      // Allocated by its first task, before any other task of the batch is handed out.
      building_.emplace(batch_index, Building{Allocate(batch_index), (count + task_samples_ - 1) / task_samples_});
    }
    if (end == count) {
      ++next_to_build_;
      next_task_ = 0;
    }
    Batch batch = building_.at(batch_index).batch;  // shares the tensors' storage
    const uint64_t generation = generation_;
    const int64_t epoch = epoch_;
    const std::shared_ptr<const std::vector<int64_t>> indices = indices_;
    lock.unlock();
    std::exception_ptr error;
    try {
      Fill(*indices, epoch, batch, begin, end);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) continue;  // StartEpoch abandoned that pass
    if (error) {
      worker_error_ = error;
      batch_ready_.notify_all();
      continue;
    }
    auto it = building_.find(batch_index);
    if (--it->second.tasks_left == 0) {
      ready_.emplace(batch_index, std::move(it->second.batch));
      building_.erase(it);
      batch_ready_.notify_all();
    }
  }
}

int64_t BatchLoader::image_buffers_allocated() const {
  std::lock_guard<std::mutex> lock(spare_mutex_);
  return image_buffers_allocated_;
}

int64_t BatchLoader::BatchCount(int64_t batch_index) const {
  return std::min<int64_t>(options_.batch_size,
                           static_cast<int64_t>(indices_->size()) - batch_index * options_.batch_size);
}

Batch BatchLoader::Allocate(int64_t batch_index) const {
  const int64_t count = BatchCount(batch_index);
  const auto image_options = torch::TensorOptions().dtype(ImageDtype()).pinned_memory(options_.pin_memory);
  const auto label_options = torch::TensorOptions().dtype(torch::kInt64).pinned_memory(options_.pin_memory);
  Batch batch;
  batch.index = batch_index;
  batch.images = options_.pin_memory
                     ? torch::empty({count, samples_->channels(), out_size_.height, out_size_.width}, image_options)
                     : ImageBuffer(count);
  batch.labels = torch::empty({count}, label_options);
  return batch;
}

torch::ScalarType BatchLoader::ImageDtype() const {
  return options_.pixels == BatchPixels::kRaw ? torch::kUInt8 : torch::kFloat32;
}

torch::Tensor BatchLoader::ImageBuffer(int64_t count) const {
  const std::vector<int64_t> shape{count, samples_->channels(), out_size_.height, out_size_.width};
  std::lock_guard<std::mutex> lock(spare_mutex_);
  for (const torch::Tensor& spare : spare_images_) {
    if (HeldByTheListAlone(spare) && spare.sizes() == shape) return spare;
  }
  torch::Tensor fresh = torch::empty(shape, ImageDtype());
  ++image_buffers_allocated_;
  if (static_cast<int64_t>(spare_images_.size()) < std::max<int64_t>(capacity_, 1) + kSpareBatches) {
    spare_images_.push_back(fresh);
    return fresh;
  }
  for (torch::Tensor& spare : spare_images_) {  // full: a free buffer of another shape (a last batch) makes room
    if (HeldByTheListAlone(spare)) {
      spare = fresh;
      break;
    }
  }
  return fresh;
}

void BatchLoader::Fill(const std::vector<int64_t>& indices, int64_t epoch, Batch& batch, int64_t begin,
                       int64_t end) const {
  const int64_t first = batch.index * options_.batch_size;
  const int64_t channels = samples_->channels();
  const int64_t plane = out_size_.height * out_size_.width;
  int64_t* label_out = batch.labels.data_ptr<int64_t>();
  if (options_.pixels == BatchPixels::kRaw) {
    uint8_t* out = batch.images.data_ptr<uint8_t>();
    for (int64_t i = begin; i < end; ++i) {
      label_out[i] = samples_->Load(indices[static_cast<size_t>(first + i)], epoch, out + i * channels * plane);
    }
    return;
  }
  float* out = batch.images.data_ptr<float>();
  std::vector<uint8_t> pixels(static_cast<size_t>(channels * plane));  // one sample, (C, H, W)
  for (int64_t i = begin; i < end; ++i) {
    const int64_t sample = indices[static_cast<size_t>(first + i)];
    label_out[i] = samples_->Load(sample, epoch, pixels.data());
    for (int64_t c = 0; c < channels; ++c) {
      const uint8_t* src = pixels.data() + c * plane;
      float* dst = out + (i * channels + c) * plane;
      const float scale = normalization_.scale[static_cast<size_t>(c)];
      const float shift = normalization_.shift[static_cast<size_t>(c)];
      for (int64_t p = 0; p < plane; ++p) dst[p] = static_cast<float>(src[p]) * scale + shift;
    }
  }
}

}  // namespace mgpu
