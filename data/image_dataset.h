// An image classification data set held in memory as uint8 pixels, and the loaders that fill it.
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/dataset_names.h"  // DefaultDataDir

namespace mgpu {

struct ImageDataset {
  std::string name;                      // "fashion-mnist/train"
  torch::Tensor images;                  // (N, C, H, W) uint8, contiguous, on the CPU
  torch::Tensor labels;                  // (N) int64
  std::vector<std::string> class_names;  // num_classes entries
  std::vector<float> mean;               // per channel, on the [0, 1] pixel scale
  std::vector<float> stddev;             // per channel
  int64_t skipped = 0;                   // images left out as unreadable (--on-bad-image skip)

  int64_t size() const { return images.size(0); }
  int64_t channels() const { return images.size(1); }
  int64_t height() const { return images.size(2); }
  int64_t width() const { return images.size(3); }
  int64_t num_classes() const { return static_cast<int64_t>(class_names.size()); }
};

struct TrainTestSplit {
  ImageDataset train;
  ImageDataset test;
  std::string folder;                 // where the files were read from
  std::vector<std::string> warnings = {};  // for the log, e.g. images left out as unreadable
};

// Loads "fashion-mnist" or "mnist" from `folder` (the four IDX files, raw or .gz). Checks that
// image and label counts agree and that labels are < 10. Throws BadInputError.
TrainTestSplit LoadMnistLike(const std::string& dataset, const std::string& folder);

}  // namespace mgpu
