#include "data/batch_loader.h"

#include <stdexcept>

namespace mgpu {
namespace {

// The options once their augmentation has moved into the sample source.
LoaderOptions WithoutAugmentation(LoaderOptions options) {
  options.augmentation = nullptr;
  return options;
}

}  // namespace

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
  for (size_t c = 0; c < samples_->mean().size(); ++c) {
    scale_.push_back(1.0f / (255.0f * samples_->stddev()[c]));
    shift_.push_back(-samples_->mean()[c] / samples_->stddev()[c]);
  }
  out_size_ = samples_->image_size();
  for (int i = 0; i < options_.num_workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_available_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void BatchLoader::StartEpoch(std::vector<int64_t> indices, int64_t epoch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    epoch_ = epoch;
    num_batches_ =
        (static_cast<int64_t>(indices.size()) + options_.batch_size - 1) / options_.batch_size;
    indices_ = std::make_shared<const std::vector<int64_t>>(std::move(indices));
    next_to_build_ = 0;
    next_to_deliver_ = 0;
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
    return Build(*indices_, epoch_, next_to_deliver_++);
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
  const int64_t capacity = static_cast<int64_t>(options_.num_workers) * options_.prefetch_per_worker;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_available_.wait(lock, [&] {
      return stopping_ ||
             (next_to_build_ < num_batches_ && next_to_build_ < next_to_deliver_ + capacity);
    });
    if (stopping_) return;
    const int64_t batch_index = next_to_build_++;
    const uint64_t generation = generation_;
    const int64_t epoch = epoch_;
    const std::shared_ptr<const std::vector<int64_t>> indices = indices_;
    lock.unlock();
    Batch batch;
    std::exception_ptr error;
    try {
      batch = Build(*indices, epoch, batch_index);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (generation != generation_) continue;  // StartEpoch abandoned that pass
    if (error) {
      worker_error_ = error;
    } else {
      ready_.emplace(batch_index, std::move(batch));
    }
    batch_ready_.notify_all();
  }
}

Batch BatchLoader::Build(const std::vector<int64_t>& indices, int64_t epoch,
                         int64_t batch_index) const {
  const int64_t begin = batch_index * options_.batch_size;
  const int64_t count =
      std::min<int64_t>(options_.batch_size, static_cast<int64_t>(indices.size()) - begin);
  const int64_t channels = samples_->channels();
  const int64_t plane = out_size_.height * out_size_.width;
  const auto float_options = torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(options_.pin_memory);
  const auto label_options = torch::TensorOptions().dtype(torch::kInt64).pinned_memory(options_.pin_memory);

  Batch batch;
  batch.index = batch_index;
  batch.images = torch::empty({count, channels, out_size_.height, out_size_.width}, float_options);
  batch.labels = torch::empty({count}, label_options);
  float* out = batch.images.data_ptr<float>();
  int64_t* label_out = batch.labels.data_ptr<int64_t>();
  std::vector<uint8_t> pixels(static_cast<size_t>(channels * plane));  // one sample, (C, H, W)
  for (int64_t i = 0; i < count; ++i) {
    const int64_t sample = indices[static_cast<size_t>(begin + i)];
    label_out[i] = samples_->Load(sample, epoch, pixels.data());
    for (int64_t c = 0; c < channels; ++c) {
      const uint8_t* src = pixels.data() + c * plane;
      float* dst = out + (i * channels + c) * plane;
      const float scale = scale_[static_cast<size_t>(c)];
      const float shift = shift_[static_cast<size_t>(c)];
      for (int64_t p = 0; p < plane; ++p) dst[p] = static_cast<float>(src[p]) * scale + shift;
    }
  }
  return batch;
}

}  // namespace mgpu
