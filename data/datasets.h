// The one entry point that loads a data set by name, for the trainer:
//   fashion-mnist, mnist  IDX files (LoadMnistLike)
//   cifar10               CIFAR-10 binary batches (LoadCifar10)
//   imagefolder           DIR/train/<class>/*, DIR/test/<class>/* (LoadImageFolder)
//   webdataset            DIR/train/*.tar, DIR/test/*.tar shards (data/streaming_images.h)
//   synthetic             random images generated in memory, for measuring compute alone
// and OpenDataset, which also decides between holding the decoded images in memory and
// decoding them as they are read (--data-loading).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/dataset_names.h"
#include "data/augment.h"
#include "data/image_dataset.h"
#include "data/sample_source.h"

namespace mgpu {

struct DatasetOptions {
  int64_t image_size = 64;            // imagefolder: the side images are resized to; synthetic: the side
  std::string on_bad_image = "fail";  // imagefolder: fail | skip
  int64_t synthetic_train = 50000;    // synthetic: training images
  int64_t synthetic_test = 10000;     // synthetic: test images
  int64_t synthetic_channels = 3;     // synthetic: 1 (grayscale) or 3 (RGB)
  uint64_t seed = 0;                  // synthetic: pixels and labels follow from it; stream: crops
  std::string data_loading = "auto";  // auto | memory | stream (OpenDataset)
  // auto streams when the decoded images would take more than this; 0: kMemoryBudgetFraction
  // of the physical memory.
  int64_t memory_budget_bytes = 0;
};

// --data-loading auto holds a data set decoded in memory while it takes at most this fraction of
// the machine's physical memory (the rest is for the model, the batches and other processes:
// DDP ranks on one host each hold their own copy), and streams it otherwise.
constexpr double kMemoryBudgetFraction = 0.25;

// Loads `name` from `folder` (ignored for synthetic) into memory. Throws BadInputError.
TrainTestSplit LoadDataset(const std::string& name, const std::string& folder,
                           const DatasetOptions& options);

struct OpenedDataset {
  std::shared_ptr<const SampleSource> train;  // with the training augmentation
  std::shared_ptr<const SampleSource> test;   // with the evaluation transform
  std::shared_ptr<const TrainTestSplit> memory;  // the decoded images; nullptr when streaming
  std::string data_loading;                      // "memory" | "stream"
  std::string folder;
  std::vector<std::string> warnings;
};

// The data set as sample sources. memory: LoadDataset, with `augmentation` for training and its
// ForEvaluation() for testing. stream (imagefolder, webdataset; data/streaming_images.h): side
// --resize, else --image-size; training takes RandomResizedCrop + flip for --augment rrc-flip,
// else the evaluation transform (resize the shorter side to side / 0.875, centre crop), which
// testing always takes. Throws BadInputError, e.g. for stream with a data set held in memory.
OpenedDataset OpenDataset(const std::string& name, const std::string& folder, const DatasetOptions& options,
                          std::shared_ptr<const Augmentation> augmentation);

// `train` + `test` images of 3 x side x side uniformly random bytes with uniformly random labels
// among 10 classes; a pure function of (seed, sizes), filled by parallel threads.
TrainTestSplit MakeSyntheticDataset(int64_t train, int64_t test, int64_t side, uint64_t seed, int64_t channels = 3);

}  // namespace mgpu
