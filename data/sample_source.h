// Where BatchLoader takes its samples from: one sample at a time, as uint8 (C, H, W) pixels of a
// fixed size and an int64 label. Two kinds:
//   InMemorySamples   an ImageDataset already decoded in memory (small data sets), with an
//                     optional per-sample augmentation (data/augment.h)
//   StreamingImages   encoded JPEG/PNG files or tar members, decoded on every read
//                     (data/streaming_images.h), for data sets that do not fit in memory
// Load() must be callable from any number of threads at once, and what it writes must depend
// only on (index, epoch) and the source's own settings: that is what keeps a batch the same
// whatever the number of loader threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/image_dataset.h"
#include "data/image_ops.h"

namespace mgpu {

class SampleSource {
 public:
  virtual ~SampleSource() = default;

  virtual std::string name() const = 0;  // "imagefolder/train"
  virtual int64_t size() const = 0;
  virtual int64_t channels() const = 0;
  // The (H, W) of the pixels Load() writes.
  virtual ImageSize image_size() const = 0;
  virtual const std::vector<std::string>& class_names() const = 0;
  // Per channel, on the [0, 1] pixel scale: BatchLoader normalizes with them.
  virtual const std::vector<float>& mean() const = 0;
  virtual const std::vector<float>& stddev() const = 0;

  // Writes sample `index`'s pixels, (channels(), image_size()), to `out` and returns its label.
  // `epoch` keys any random draws. Throws BadInputError for unreadable data.
  virtual int64_t Load(int64_t index, int64_t epoch, uint8_t* out) const = 0;

  // Undecodable samples replaced so far (--on-bad-image skip), and the messages of those found
  // since the last call, each reported once. In-memory sources have none.
  virtual int64_t skipped() const { return 0; }
  virtual std::vector<std::string> TakeNewlySkipped() const { return {}; }

  int64_t num_classes() const { return static_cast<int64_t>(class_names().size()); }
};

class InMemorySamples : public SampleSource {
 public:
  // `dataset` must outlive this object, unless `owner` keeps it alive (an aliasing handle, e.g.
  // to the TrainTestSplit it belongs to). `augmentation` nullptr: the stored pixels.
  InMemorySamples(const ImageDataset& dataset, std::shared_ptr<const Augmentation> augmentation,
                  std::shared_ptr<const void> owner = nullptr);

  std::string name() const override { return dataset_.name; }
  int64_t size() const override { return dataset_.size(); }
  int64_t channels() const override { return dataset_.channels(); }
  ImageSize image_size() const override { return out_size_; }
  const std::vector<std::string>& class_names() const override { return dataset_.class_names; }
  const std::vector<float>& mean() const override { return dataset_.mean; }
  const std::vector<float>& stddev() const override { return dataset_.stddev; }
  int64_t Load(int64_t index, int64_t epoch, uint8_t* out) const override;
  // The images left out when the data set was decoded (their messages went to its warnings).
  int64_t skipped() const override { return dataset_.skipped; }

  const ImageDataset& dataset() const { return dataset_; }

 private:
  std::shared_ptr<const void> owner_;
  const ImageDataset& dataset_;
  std::shared_ptr<const Augmentation> augmentation_;  // nullptr when it would copy the pixels
  ImageSize out_size_;
};

}  // namespace mgpu
