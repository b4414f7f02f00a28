#include "data/image_dataset.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "data/idx_reader.h"

namespace mgpu {
namespace {

const std::vector<std::string> kFashionMnistClasses = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
const std::vector<std::string> kDigitClasses = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

// "train-images-idx3-ubyte" in `folder`, with or without .gz (the .gz wins if both exist).
std::string FindIdxFile(const std::string& folder, const std::string& stem) {
  const std::string gz = folder + "/" + stem + ".gz";
  if (PathExists(gz)) return gz;
  const std::string raw = folder + "/" + stem;
  if (PathExists(raw)) return raw;
  throw BadInputError(fmt::format(
      "data file missing: neither {} nor {} exists. Point --data-dir at a folder with the four "
      "IDX files (train/t10k images/labels){}",
      gz, raw,
      folder.find("fashion") != std::string::npos
          ? ", or install them with `apt-get install dataset-fashion-mnist`"
          : ""));
}

ImageDataset LoadSplit(const std::string& dataset, const std::string& folder,
                       const std::string& prefix, const std::vector<std::string>& classes) {
  const std::string images_path = FindIdxFile(folder, prefix + "-images-idx3-ubyte");
  const std::string labels_path = FindIdxFile(folder, prefix + "-labels-idx1-ubyte");
  IdxArray images = ReadIdxFile(images_path, 3);
  IdxArray labels = ReadIdxFile(labels_path, 1);
  if (images.dims[0] != labels.dims[0]) {
    throw BadInputError(fmt::format("{} holds {} images but {} holds {} labels; the two files "
                                    "must come from the same data set release",
                                    images_path, images.dims[0], labels_path, labels.dims[0]));
  }
  for (size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= classes.size()) {
      throw BadInputError(fmt::format("{}: label {} at index {} is out of range; {} has {} "
                                      "classes (0-{})",
                                      labels_path, labels.data[i], i, dataset, classes.size(),
                                      classes.size() - 1));
    }
  }
  ImageDataset split;
  split.name = dataset + "/" + prefix;
  const int64_t n = images.dims[0], h = images.dims[1], w = images.dims[2];
  split.images = torch::empty({n, 1, h, w}, torch::kUInt8);
  std::memcpy(split.images.data_ptr<uint8_t>(), images.data.data(), images.data.size());
  split.labels = torch::empty({n}, torch::kInt64);
  int64_t* label_out = split.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) label_out[i] = labels.data[static_cast<size_t>(i)];
  split.class_names = classes;
  if (dataset == "fashion-mnist") {
    split.mean = {0.2860f};
    split.stddev = {0.3530f};
  } else {
    split.mean = {0.1307f};
    split.stddev = {0.3081f};
  }
  return split;
}

}  // namespace

TrainTestSplit LoadMnistLike(const std::string& dataset, const std::string& folder) {
  const auto& classes = dataset == "fashion-mnist" ? kFashionMnistClasses : kDigitClasses;
  if (!IsDirectory(folder)) {
    throw BadInputError(fmt::format(
        "data folder {} does not exist (data set {}). {}", folder, dataset,
        dataset == "fashion-mnist"
            ? "Install it with `apt-get install dataset-fashion-mnist` or pass --data-dir DIR"
            : "Pass --data-dir DIR with the four IDX files"));
  }
  TrainTestSplit split{LoadSplit(dataset, folder, "train", classes),
                       LoadSplit(dataset, folder, "t10k", classes), folder};
  if (split.train.images.sizes().slice(1) != split.test.images.sizes().slice(1)) {
    throw BadInputError(fmt::format("{}: training images are {} but test images are {}; both "
                                    "splits must have the same image size",
                                    folder, fmt::join(split.train.images.sizes().slice(1), "x"),
                                    fmt::join(split.test.images.sizes().slice(1), "x")));
  }
  return split;
}

}  // namespace mgpu
