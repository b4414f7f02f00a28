#include "data/streaming_images.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "common/files.h"
#include "common/read_only_file.h"
#include "common/status.h"
#include "data/counter_rng.h"
#include "data/image_codec.h"
#include "data/image_folder.h"
#include "data/image_ops.h"
#include "data/regular_file.h"
#include "data/tar_index.h"

namespace mgpu {
namespace {

// ImageNet's evaluation convention: resize to side / 0.875 (256 for 224), crop the centre side.
constexpr double kCenterCropFraction = 0.875;
// A .cls member holds a short integer; more is not a label.
constexpr int64_t kMaxLabelBytes = 64;
constexpr size_t kErrorsShown = 5;

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

EncodedSamples FromFolderSplit(ImageFolderSplit split) {
  EncodedSamples samples;
  samples.files = std::move(split.paths);
  samples.labels = std::move(split.labels);
  samples.entries.resize(samples.files.size());
  for (size_t i = 0; i < samples.entries.size(); ++i) samples.entries[i].file = static_cast<int32_t>(i);
  return samples;
}

// `size` bytes at `offset` of `path` (size < 0: the whole file). Throws BadInputError.
std::vector<uint8_t> ReadSpan(const std::string& path, int64_t offset, int64_t size) {
  // Opening a FIFO would block: a folder entry is examined first.
  if (const std::string why = WhyNotARegularFile(path); !why.empty()) {
    throw BadInputError(fmt::format("{}: {}; replace it with a file or remove it", path, why));
  }
  const ReadOnlyFile file(path);
  if (size < 0) size = file.Size();
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  const int64_t got = file.ReadAt(offset, bytes.data(), size);
  if (got < size) {
    throw BadInputError(fmt::format("{}: the file ends at byte {}, before the {} bytes expected at byte {}",
                                    path, offset + got, size, offset));
  }
  return bytes;
}

std::vector<std::string> TarShards(const std::string& dir) {
  if (!IsDirectory(dir)) {
    throw BadInputError(fmt::format("{}: folder not found; --dataset webdataset reads DIR/train/*.tar and "
                                    "DIR/test/*.tar (each sample KEY.jpg|jpeg|png + KEY.cls); point --data-dir at DIR",
                                    dir));
  }
  std::vector<std::string> shards;
  for (const std::string& name : ListDirectory(dir)) {
    if (Lower(name).size() <= 4 || Lower(name).substr(name.size() - 4) != ".tar") continue;
    const std::string shard = dir + "/" + name;
    if (const std::string why = WhyNotARegularFile(shard); !why.empty()) {
      throw BadInputError(fmt::format("{}: {}; a shard must be a tar file: replace or remove it", shard, why));
    }
    shards.push_back(shard);
  }
  if (shards.empty()) {
    throw BadInputError(fmt::format("{}: no .tar shards; --dataset webdataset reads DIR/train/*.tar and DIR/test/*.tar, "
                                    "each sample a KEY.jpg|jpeg|png with its KEY.cls (the label as text)", dir));
  }
  return shards;  // ListDirectory sorts
}

// One shard's samples appended to `samples`, in the order their first member appears.
void IndexShard(const std::string& shard, EncodedSamples& samples) {
  struct Pending {
    std::string key;
    const TarMember* image = nullptr;
    const TarMember* label = nullptr;
  };
  const std::vector<TarMember> members = ReadTarIndex(shard);
  std::vector<Pending> pending;
  std::unordered_map<std::string, size_t> by_key;
  for (const TarMember& member : members) {
    // WebDataset's convention: the key is the path up to the first dot of the file name.
    const size_t slash = member.name.rfind('/');
    const size_t dot = member.name.find('.', slash == std::string::npos ? 0 : slash + 1);
    if (dot == std::string::npos) continue;
    const std::string key = member.name.substr(0, dot);
    const std::string extension = Lower(member.name.substr(dot + 1));
    const bool image = extension == "jpg" || extension == "jpeg" || extension == "png";
    if (!image && extension != "cls") continue;
    auto [it, inserted] = by_key.emplace(key, pending.size());
    if (inserted) pending.push_back(Pending{key});
    Pending& sample = pending[it->second];
    const TarMember*& slot = image ? sample.image : sample.label;
    if (slot != nullptr) {
      throw BadInputError(fmt::format("{}: sample '{}' has two {} members (at bytes {} and {}); keep one per key",
                                      shard, key, image ? "image" : ".cls", slot->offset, member.offset));
    }
    slot = &member;
  }
  const auto file = static_cast<int32_t>(samples.files.size());
  samples.files.push_back(shard);
  for (const Pending& sample : pending) {
    if (sample.image == nullptr || sample.label == nullptr) {
      throw BadInputError(fmt::format("{}: sample '{}' has {} but no {}; each sample needs KEY.jpg|jpeg|png and "
                                      "KEY.cls (its integer label) in the same shard",
                                      shard, sample.key, sample.image ? "an image" : "a .cls label",
                                      sample.image ? ".cls label" : ".jpg, .jpeg or .png image"));
    }
    if (sample.label->size > kMaxLabelBytes) {
      throw BadInputError(fmt::format("{}: {}.cls holds {} bytes, not an integer label; write the class index as text",
                                      shard, sample.key, sample.label->size));
    }
    const std::vector<uint8_t> bytes = ReadSpan(shard, sample.label->offset, sample.label->size);
    std::string text(bytes.begin(), bytes.end());
    text.erase(text.find_last_not_of(" \t\r\n") + 1);
    text.erase(0, text.find_first_not_of(" \t\r\n"));
    char* end = nullptr;
    errno = 0;
    const long long label = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || errno != 0 || *end != '\0' || label < 0) {
      throw BadInputError(fmt::format("{}: {}.cls holds '{}', not a label: write the class index as a "
                                      "non-negative integer, e.g. 3", shard, sample.key, text));
    }
    samples.entries.push_back(EncodedSamples::Entry{sample.image->offset, sample.image->size, file});
    samples.labels.push_back(label);
  }
}

EncodedSamples IndexShards(const std::string& dir) {
  EncodedSamples samples;
  for (const std::string& shard : TarShards(dir)) IndexShard(shard, samples);
  if (samples.entries.empty()) {
    throw BadInputError(fmt::format("{}: the shards hold no samples (KEY.jpg|jpeg|png + KEY.cls pairs)", dir));
  }
  return samples;
}

void CheckLabels(const EncodedSamples& samples, int64_t classes, const std::string& why) {
  for (size_t i = 0; i < samples.labels.size(); ++i) {
    if (samples.labels[i] >= classes) {
      const auto& entry = samples.entries[i];
      throw BadInputError(fmt::format("{}: the sample whose image is at byte {} has label {}, outside 0..{} ({}); "
                                      "fix its .cls or the class list",
                                      samples.files[static_cast<size_t>(entry.file)], entry.offset,
                                      samples.labels[i], classes - 1, why));
    }
  }
}

}  // namespace

EncodedDataset ListStreamingImageFolder(const std::string& folder) {
  ImageFolderListing listing = ListImageFolder(folder);
  EncodedDataset data;
  data.class_names = std::move(listing.class_names);
  data.train = FromFolderSplit(std::move(listing.train));
  data.test = FromFolderSplit(std::move(listing.test));
  return data;
}

EncodedDataset ListWebDataset(const std::string& folder) {
  EncodedDataset data;
  data.train = IndexShards(folder + "/train");
  data.test = IndexShards(folder + "/test");
  const std::string classes_file = folder + "/classes.txt";
  std::string why;
  if (IsRegularFile(classes_file)) {
    const std::string text = ReadFile(classes_file);
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(at, end - at);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      data.class_names.push_back(line);
      at = end + 1;
    }
    while (!data.class_names.empty() && data.class_names.back().empty()) data.class_names.pop_back();
    if (data.class_names.empty()) {
      throw BadInputError(fmt::format("{}: no class names; write one per line (line K names label K) or remove "
                                      "the file to number the classes", classes_file));
    }
    why = fmt::format("{} lists {} classes", classes_file, data.class_names.size());
  } else {
    const int64_t largest = *std::max_element(data.train.labels.begin(), data.train.labels.end());
    for (int64_t c = 0; c <= largest; ++c) data.class_names.push_back(std::to_string(c));
    why = fmt::format("the training labels go up to {}; a classes.txt can name more classes", largest);
  }
  const auto classes = static_cast<int64_t>(data.class_names.size());
  CheckLabels(data.train, classes, why);
  CheckLabels(data.test, classes, why);
  return data;
}

Window CenterCropWindow(ImageSize full, int64_t side) {
  // torchvision: Resize(R) scales the shorter side to R = round(side / 0.875); CenterCrop(side)
  // then takes side x side. In the original's pixels, that is a square of side * shorter / R.
  const auto resized = static_cast<double>(std::llround(static_cast<double>(side) / kCenterCropFraction));
  const int64_t shorter = std::min(full.height, full.width);
  const int64_t crop = std::clamp<int64_t>(
      std::llround(static_cast<double>(side) * static_cast<double>(shorter) / resized), 1, shorter);
  return Window{(full.height - crop) / 2, (full.width - crop) / 2, crop, crop};
}

StreamingImages::StreamingImages(EncodedSamples samples, std::vector<std::string> class_names, StreamOptions options)
    : samples_(std::move(samples)), class_names_(std::move(class_names)), options_(std::move(options)) {
  if (options_.side < 1) throw BadInputError(fmt::format("--image-size {} must be at least 1", options_.side));
}

std::vector<uint8_t> StreamingImages::ReadEncoded(int64_t index) const {
  const EncodedSamples::Entry& entry = samples_.entries[static_cast<size_t>(index)];
  return ReadSpan(samples_.files[static_cast<size_t>(entry.file)], entry.offset, entry.size);
}

std::string StreamingImages::Where(int64_t index) const {
  const EncodedSamples::Entry& entry = samples_.entries[static_cast<size_t>(index)];
  const std::string& file = samples_.files[static_cast<size_t>(entry.file)];
  return entry.size < 0 ? file : fmt::format("{} (member at byte {})", file, entry.offset);
}

CropPlan StreamingImages::PlanCrop(int64_t index, int64_t epoch, ImageSize full) const {
  switch (options_.transform) {
    case StreamTransform::kRandomResizedCropFlip: {
      CounterRng rng(options_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index));
      CropPlan plan;
      plan.window = DrawResizedCrop(rng, full);
      plan.flip = rng.Coin();
      return plan;
    }
    case StreamTransform::kResizeCenterCrop:
      return CropPlan{CenterCropWindow(full, options_.side), false};
    case StreamTransform::kStretch:
      break;
  }
  return CropPlan{Window{0, 0, full.height, full.width}, false};
}

std::string StreamingImages::TryLoad(int64_t index, int64_t epoch, uint8_t* out) const {
  std::vector<uint8_t> bytes;
  try {
    bytes = ReadEncoded(index);
  } catch (const BadInputError& e) {
    return e.what();
  }
  return TryDecode(index, epoch, bytes, out);
}

std::string StreamingImages::TryDecode(int64_t index, int64_t epoch, const std::vector<uint8_t>& bytes,
                                       uint8_t* out) const {
  const ImageSize out_size = image_size();
  try {
    bool flip = false;
    const auto pick = [&](ImageSize full) {
      const CropPlan plan = PlanCrop(index, epoch, full);
      flip = plan.flip;
      return plan.window;
    };
    const DecodedRegion region = DecodeImageRegion(bytes.data(), bytes.size(), Where(index), pick, out_size);
    const DecodedImage& image = region.image;
    ResizeWindowInterleaved(image.rgb.data(), 3, ImageSize{image.height, image.width}, region.window, out, out_size,
                            flip);
  } catch (const BadInputError& e) {
    return e.what();
  }
  return "";
}

int64_t StreamingImages::Load(int64_t index, int64_t epoch, uint8_t* out) const {
  const int64_t n = size();
  for (int64_t tried = 0; tried < n; ++tried) {
    const int64_t candidate = (index + tried) % n;
    const std::string error = TryLoad(candidate, epoch, out);
    if (error.empty()) return label(candidate);
    if (!options_.skip_bad_images) {
      throw BadInputError(fmt::format("{}\nReplace or remove the image, or pass --on-bad-image skip to train on "
                                      "without it", error));
    }
    RecordSkipped(candidate, error);
  }
  throw BadInputError(fmt::format("{}: none of its {} images can be decoded; see the skipped images above",
                                  options_.name, n));
}

void StreamingImages::RecordSkipped(int64_t index, const std::string& error) const {
  std::lock_guard<std::mutex> lock(skipped_mutex_);
  if (skipped_.insert(index).second) newly_skipped_.push_back("skipped unreadable image " + error);
}

int64_t StreamingImages::skipped() const {
  std::lock_guard<std::mutex> lock(skipped_mutex_);
  return static_cast<int64_t>(skipped_.size());
}

std::vector<std::string> StreamingImages::TakeNewlySkipped() const {
  std::lock_guard<std::mutex> lock(skipped_mutex_);
  std::vector<std::string> taken;
  taken.swap(newly_skipped_);
  return taken;
}

ImageDataset DecodeIntoMemory(const StreamingImages& source, bool skip_bad_images, int threads,
                              std::vector<std::string>& warnings) {
  const int64_t n = source.size();
  const int64_t side = source.image_size().height;
  const int64_t sample_bytes = 3 * side * side;
  torch::Tensor images = torch::empty({n, 3, side, side}, torch::kUInt8);  // (N, 3, S, S)
  uint8_t* pixels = images.data_ptr<uint8_t>();
  std::vector<std::string> errors(static_cast<size_t>(n));  // empty: decoded
  std::atomic<int64_t> next{0};
  auto decode_some = [&] {
    for (int64_t i = next++; i < n; i = next++) errors[static_cast<size_t>(i)] = source.TryLoad(i, 0, pixels + i * sample_bytes);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int64_t>(std::max(threads, 1), n); ++t) pool.emplace_back(decode_some);
  decode_some();
  for (auto& thread : pool) thread.join();

  std::vector<int64_t> good, labels;
  std::vector<std::string> bad;
  for (int64_t i = 0; i < n; ++i) {
    if (errors[static_cast<size_t>(i)].empty()) {
      good.push_back(i);
      labels.push_back(source.label(i));
    } else {
      bad.push_back(errors[static_cast<size_t>(i)]);
    }
  }
  if (!bad.empty() && !skip_bad_images) {
    const std::vector<std::string> shown(bad.begin(), bad.begin() + std::min(bad.size(), kErrorsShown));
    throw BadInputError(fmt::format("{} of {} images of {} cannot be read:\n  {}{}\nReplace or remove them, or pass "
                                    "--on-bad-image skip to leave them out", bad.size(), n, source.name(),
                                    fmt::join(shown, "\n  "), bad.size() > shown.size() ? "\n  ..." : ""));
  }
  if (good.empty()) throw BadInputError(fmt::format("{}: none of its {} images can be read; first: {}", source.name(), n, bad.front()));
  for (const std::string& error : bad) warnings.push_back("skipped unreadable image " + error);
  ImageDataset dataset;
  dataset.name = source.name();
  dataset.skipped = static_cast<int64_t>(bad.size());
  dataset.images = bad.empty() ? images : images.index_select(0, torch::tensor(good, torch::kInt64)).contiguous();
  dataset.labels = torch::tensor(labels, torch::kInt64);
  dataset.class_names = source.class_names();
  dataset.mean = source.mean();
  dataset.stddev = source.stddev();
  return dataset;
}

}  // namespace mgpu
