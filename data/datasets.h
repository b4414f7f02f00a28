// The one entry point that loads a data set by name, for the trainer:
//   fashion-mnist, mnist  IDX files (LoadMnistLike)
//   cifar10               CIFAR-10 binary batches (LoadCifar10)
//   imagefolder           DIR/train/<class>/*, DIR/test/<class>/* (LoadImageFolder)
//   synthetic             random images generated in memory, for measuring compute alone
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image_dataset.h"

namespace mgpu {

struct DatasetOptions {
  int64_t image_size = 64;            // imagefolder: the side images are resized to; synthetic: the side
  std::string on_bad_image = "fail";  // imagefolder: fail | skip
  int64_t synthetic_train = 50000;    // synthetic: training images
  int64_t synthetic_test = 10000;     // synthetic: test images
  uint64_t seed = 0;                  // synthetic: pixels and labels follow from it
};

// Names accepted by LoadDataset, in the order help texts list them.
const std::vector<std::string>& DatasetNames();

// Loads `name` from `folder` (ignored for synthetic). Throws BadInputError.
TrainTestSplit LoadDataset(const std::string& name, const std::string& folder,
                           const DatasetOptions& options);

// `train` + `test` images of 3 x side x side uniformly random bytes with uniformly random labels
// among 10 classes; a pure function of (seed, sizes), filled by parallel threads.
TrainTestSplit MakeSyntheticDataset(int64_t train, int64_t test, int64_t side, uint64_t seed);

}  // namespace mgpu
