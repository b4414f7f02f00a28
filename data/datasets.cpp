#include "data/datasets.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "common/status.h"
#include "data/cifar10.h"
#include "data/counter_rng.h"
#include "data/image_folder.h"
#include "data/streaming_images.h"

namespace mgpu {
namespace {

constexpr int64_t kSyntheticClasses = 10;

// Every byte b of the split is byte (b % 8) of the draw b / 8 of the stream (seed, split, 0):
// the result does not depend on how the work is divided among threads.
ImageDataset SyntheticSplit(const std::string& name, uint64_t split_id, int64_t n, int64_t channels, int64_t side,
                            uint64_t seed) {
  ImageDataset split;
  split.name = "synthetic/" + name;
  split.images = torch::empty({n, channels, side, side}, torch::kUInt8);  // (N, C, S, S)
  uint8_t* pixels = split.images.data_ptr<uint8_t>();
  const int64_t bytes = split.images.numel();
  const CounterRng pixel_stream(seed, split_id, 0);
  const int64_t words = (bytes + 7) / 8;
  const int threads = static_cast<int>(
      std::clamp<int64_t>(words / (int64_t{1} << 20), 1, std::max(1u, std::thread::hardware_concurrency())));
  auto fill = [&](int64_t first_word, int64_t last_word) {
    for (int64_t w = first_word; w < last_word; ++w) {
      uint64_t draw = pixel_stream.At(static_cast<uint64_t>(w));
      for (int64_t b = w * 8; b < std::min(bytes, w * 8 + 8); ++b, draw >>= 8) {
        pixels[b] = static_cast<uint8_t>(draw);
      }
    }
  };
  std::vector<std::thread> pool;
  const int64_t per_thread = (words + threads - 1) / threads;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back(fill, t * per_thread, std::min(words, (t + 1) * per_thread));
  }
  fill(0, std::min(words, per_thread));
  for (auto& thread : pool) thread.join();

  split.labels = torch::empty({n}, torch::kInt64);
  int64_t* labels = split.labels.data_ptr<int64_t>();
  const CounterRng label_stream(seed, split_id, 1);
  for (int64_t i = 0; i < n; ++i) {
    // The top 32 bits scaled to [0, 10): no modulo bias worth the name.
    labels[i] = static_cast<int64_t>((label_stream.At(static_cast<uint64_t>(i)) >> 32) * kSyntheticClasses >> 32);
  }
  for (int64_t c = 0; c < kSyntheticClasses; ++c) split.class_names.push_back(std::to_string(c));
  // Uniform bytes 0..255: mean 127.5, standard deviation sqrt((256^2 - 1) / 12).
  split.mean = std::vector<float>(static_cast<size_t>(channels), 0.5f);
  split.stddev = std::vector<float>(static_cast<size_t>(channels),
                                    static_cast<float>(std::sqrt((256.0 * 256.0 - 1.0) / 12.0) / 255.0));
  return split;
}

}  // namespace

TrainTestSplit MakeSyntheticDataset(int64_t train, int64_t test, int64_t side, uint64_t seed, int64_t channels) {
  if (train < 1 || test < 1 || side < 1) {
    throw BadInputError(fmt::format("synthetic data needs at least 1 training image, 1 test image "
                                    "and 1 pixel; got --synthetic-train {}, --synthetic-test {}, "
                                    "--image-size {}", train, test, side));
  }
  if (channels != 1 && channels != 3) {
    throw BadInputError(fmt::format("--synthetic-channels {}: synthetic images have 1 (grayscale) or 3 (RGB)",
                                    channels));
  }
  return TrainTestSplit{SyntheticSplit("train", 0, train, channels, side, seed),
                        SyntheticSplit("test", 1, test, channels, side, seed),
                        fmt::format("generated from seed {}", seed), {}};
}

TrainTestSplit LoadDataset(const std::string& name, const std::string& folder,
                           const DatasetOptions& options) {
  if (name == "fashion-mnist" || name == "mnist") return LoadMnistLike(name, folder);
  if (name == "cifar10") return LoadCifar10(folder);
  if (name == "imagefolder") {
    return LoadImageFolder(folder, ImageFolderOptions{options.image_size, options.on_bad_image, 0});
  }
  if (name == "synthetic") {
    return MakeSyntheticDataset(options.synthetic_train, options.synthetic_test, options.image_size,
                                options.seed, options.synthetic_channels);
  }
  if (name == "webdataset") {
    // Stretched to image_size x image_size, as imagefolder's images in memory.
    EncodedDataset listing = ListWebDataset(folder);
    TrainTestSplit split;
    split.folder = folder;
    const bool skip = options.on_bad_image == "skip";
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (auto [samples, out, split_name] : {std::tuple{&listing.train, &split.train, "train"},
                                            std::tuple{&listing.test, &split.test, "test"}}) {
      const StreamingImages source(std::move(*samples), listing.class_names,
                                   StreamOptions{fmt::format("webdataset/{}", split_name), options.image_size,
                                                 StreamTransform::kStretch, skip, options.seed});
      *out = DecodeIntoMemory(source, skip, threads, split.warnings);
    }
    return split;
  }
  throw BadInputError(fmt::format("unknown data set '{}'; available: {}", name,
                                  fmt::join(DatasetNames(), ", ")));
}

namespace {

std::string ChooseDataLoading(const std::string& name, const std::string& requested, int64_t images,
                              int64_t side, int64_t budget_bytes) {
  const bool streamable = name == "imagefolder" || name == "webdataset";
  if (requested == "stream" && !streamable) {
    throw BadInputError(fmt::format("--data-loading stream decodes image files as they are read, which --dataset {} "
                                    "does not have (it is held in memory); use --data-loading auto or memory, or "
                                    "--dataset imagefolder / webdataset", name));
  }
  if (requested == "memory" || requested == "stream") return requested;
  if (requested != "auto") {
    throw BadInputError(fmt::format("--data-loading '{}' is not one of: auto, memory, stream", requested));
  }
  if (!streamable) return "memory";
  const int64_t decoded = images * 3 * side * side;
  return decoded > budget_bytes ? "stream" : "memory";
}

int64_t DefaultMemoryBudget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return static_cast<int64_t>(kMemoryBudgetFraction * static_cast<double>(pages) * static_cast<double>(page));
}

}  // namespace

OpenedDataset OpenDataset(const std::string& name, const std::string& folder, const DatasetOptions& options,
                          std::shared_ptr<const Augmentation> augmentation) {
  OpenedDataset opened;
  opened.folder = folder;
  const int64_t budget = options.memory_budget_bytes > 0 ? options.memory_budget_bytes : DefaultMemoryBudget();
  std::optional<EncodedDataset> listing;  // imagefolder and webdataset: listed once, to count
  if (name == "imagefolder" || name == "webdataset") {
    listing = name == "imagefolder" ? ListStreamingImageFolder(folder) : ListWebDataset(folder);
  }
  const int64_t images = listing ? listing->train.size() + listing->test.size() : 0;
  opened.data_loading = ChooseDataLoading(name, options.data_loading, images, options.image_size, budget);
  if (opened.data_loading == "memory") {
    auto memory = std::make_shared<const TrainTestSplit>(LoadDataset(name, folder, options));
    opened.train = std::make_shared<const InMemorySamples>(memory->train, augmentation, memory);
    opened.test = std::make_shared<const InMemorySamples>(memory->test, augmentation->ForEvaluation(), memory);
    opened.warnings = memory->warnings;
    opened.folder = memory->folder;
    opened.memory = std::move(memory);
    return opened;
  }
  const AugmentOptions& augment = augmentation->options();
  if (augment.kind != "none" && augment.kind != "resize" && augment.kind != "rrc-flip") {
    throw BadInputError(fmt::format("--data-loading stream crops each image as it decodes it: --augment none, resize "
                                    "or rrc-flip, not {}; change --augment or use --data-loading memory",
                                    augment.kind));
  }
  const int64_t side = augment.resize > 0 ? augment.resize : options.image_size;
  const bool skip = options.on_bad_image == "skip";
  const StreamTransform train_transform =
      augment.kind == "rrc-flip" ? StreamTransform::kRandomResizedCropFlip : StreamTransform::kResizeCenterCrop;
  opened.train = std::make_shared<const StreamingImages>(
      std::move(listing->train), listing->class_names,
      StreamOptions{name + "/train", side, train_transform, skip, augment.seed});
  opened.test = std::make_shared<const StreamingImages>(
      std::move(listing->test), listing->class_names,
      StreamOptions{name + "/test", side, StreamTransform::kResizeCenterCrop, skip, augment.seed});
  return opened;
}

}  // namespace mgpu
