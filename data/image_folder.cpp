#include "data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "data/image_codec.h"
#include "data/image_ops.h"

namespace mgpu {
namespace {

constexpr size_t kErrorsShown = 5;

bool IsImageFile(const std::string& name) {
  const size_t dot = name.rfind('.');
  std::string ext = dot == std::string::npos ? "" : name.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<std::string> SortedSubfolders(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& name : ListDirectory(dir)) {
    if (IsDirectory(dir + "/" + name)) names.push_back(name);
  }
  return names;
}

ImageFolderSplit ListSplit(const std::string& dir, const std::vector<std::string>& classes) {
  ImageFolderSplit listing;
  for (const std::string& name : SortedSubfolders(dir)) {
    const auto it = std::find(classes.begin(), classes.end(), name);
    if (it == classes.end()) {
      throw BadInputError(fmt::format("{}/{}: class folder not found in the training split (classes: "
                                      "{}); train/ and test/ must have the same class folders",
                                      dir, name, fmt::join(classes, ", ")));
    }
    std::vector<std::string> files;
    for (const auto& file : ListDirectory(dir + "/" + name)) {
      const std::string path = dir + "/" + name + "/" + file;
      // Not only regular files: a FIFO or a broken link under an image's name is reported when
      // it is read, not left out unseen.
      if (IsImageFile(file) && !IsDirectory(path)) files.push_back(path);
    }
    if (files.empty()) {
      throw BadInputError(fmt::format("{}/{}: no .jpg, .jpeg or .png images in this class folder; "
                                      "add images or remove the folder", dir, name));
    }
    std::sort(files.begin(), files.end());
    for (auto& file : files) {
      listing.paths.push_back(std::move(file));
      listing.labels.push_back(it - classes.begin());
    }
  }
  if (listing.paths.empty()) {
    throw BadInputError(fmt::format("{}: no class sub-folders; expected one folder of images per "
                                    "class, e.g. {}/{}/1.jpg", dir, dir, classes.front()));
  }
  return listing;
}

ImageDataset LoadSplit(const std::string& dir, const ImageFolderSplit& listing, const std::string& split_name,
                       const std::vector<std::string>& classes, const ImageFolderOptions& options,
                       std::vector<std::string>& warnings) {
  const auto n = static_cast<int64_t>(listing.paths.size());
  const int64_t side = options.image_size;
  const ImageSize size{side, side};
  torch::Tensor images = torch::empty({n, 3, side, side}, torch::kUInt8);  // (N, 3, S, S)
  uint8_t* pixels = images.data_ptr<uint8_t>();
  std::vector<std::string> errors(static_cast<size_t>(n));  // empty: decoded

  std::atomic<int64_t> next{0};
  auto decode_some = [&] {
    for (int64_t i = next++; i < n; i = next++) {
      const std::string& path = listing.paths[static_cast<size_t>(i)];
      try {
        const DecodedImage image = DecodeImageFile(path);
        ResizeWindowInterleaved(image.rgb.data(), 3, ImageSize{image.height, image.width},
                                Window{0, 0, image.height, image.width}, pixels + i * 3 * side * side, size,
                                /*flip=*/false);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    }
  };
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = static_cast<int>(std::min<int64_t>(options.threads > 0 ? options.threads : hardware, n));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(decode_some);
  decode_some();
  for (auto& thread : pool) thread.join();

  std::vector<int64_t> good;
  std::vector<std::string> bad;
  for (int64_t i = 0; i < n; ++i) {
    if (errors[static_cast<size_t>(i)].empty()) {
      good.push_back(i);
    } else {
      bad.push_back(errors[static_cast<size_t>(i)]);
    }
  }
  if (!bad.empty() && options.on_bad_image != "skip") {
    const std::vector<std::string> shown(bad.begin(), bad.begin() + std::min(bad.size(), kErrorsShown));
    throw BadInputError(fmt::format("{} of {} images in {} cannot be read:\n  {}{}\nReplace or remove "
                                    "them, or pass --on-bad-image skip to leave them out",
                                    bad.size(), n, dir, fmt::join(shown, "\n  "),
                                    bad.size() > shown.size() ? "\n  ..." : ""));
  }
  if (good.empty()) {
    throw BadInputError(fmt::format("{}: none of its {} images can be read; first: {}", dir, n, bad.front()));
  }
  for (const std::string& error : bad) warnings.push_back("skipped unreadable image " + error);
  if (!bad.empty()) {
    warnings.push_back(fmt::format("skipped {} of {} images in {} (--on-bad-image skip)", bad.size(), n, dir));
  }

  ImageDataset split;
  split.name = "imagefolder/" + split_name;
  split.skipped = static_cast<int64_t>(bad.size());
  const torch::Tensor kept = torch::tensor(good, torch::kInt64);
  split.images = bad.empty() ? images : images.index_select(0, kept).contiguous();
  split.labels = torch::tensor(listing.labels, torch::kInt64).index_select(0, kept);
  split.class_names = classes;
  split.mean = {0.485f, 0.456f, 0.406f};
  split.stddev = {0.229f, 0.224f, 0.225f};
  return split;
}

}  // namespace

ImageFolderListing ListImageFolder(const std::string& folder) {
  for (const char* split : {"train", "test"}) {
    if (!IsDirectory(folder + "/" + split)) {
      throw BadInputError(fmt::format(
          "{}/{}: folder not found; --dataset imagefolder reads DIR/train/<class>/*.jpg|png and "
          "DIR/test/<class>/*.jpg|png (one sub-folder per class); point --data-dir at DIR",
          folder, split));
    }
  }
  ImageFolderListing listing;
  listing.class_names = SortedSubfolders(folder + "/train");
  if (listing.class_names.empty()) {
    throw BadInputError(fmt::format("{}/train: no class sub-folders; expected one folder of images "
                                    "per class, e.g. {}/train/cat/1.jpg", folder, folder));
  }
  listing.train = ListSplit(folder + "/train", listing.class_names);
  listing.test = ListSplit(folder + "/test", listing.class_names);
  return listing;
}

TrainTestSplit LoadImageFolder(const std::string& folder, const ImageFolderOptions& options) {
  if (options.image_size < 1) {
    throw BadInputError(fmt::format("--image-size {} must be at least 1", options.image_size));
  }
  if (options.on_bad_image != "fail" && options.on_bad_image != "skip") {
    throw BadInputError(fmt::format("--on-bad-image '{}' is not one of: fail, skip", options.on_bad_image));
  }
  const ImageFolderListing listing = ListImageFolder(folder);
  TrainTestSplit split;
  split.folder = folder;
  split.train = LoadSplit(folder + "/train", listing.train, "train", listing.class_names, options, split.warnings);
  split.test = LoadSplit(folder + "/test", listing.test, "test", listing.class_names, options, split.warnings);
  return split;
}

}  // namespace mgpu
