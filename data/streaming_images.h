// Images decoded as they are read, for data sets too large to hold decoded in memory
// (--data-loading stream). Only the index is held: per sample, the file (an image, or a tar
// shard with the member's offset and size) and the label. Each Load() reads the encoded bytes
// and decodes them again, so every epoch pays the decode, spread over the loader's threads.
//
// Transforms (torchvision equivalents), all computed on the image's original size:
//   kRandomResizedCropFlip  RandomResizedCrop(side, scale=(0.08, 1), ratio=(3/4, 4/3)) +
//                           RandomHorizontalFlip; draws keyed by (seed, epoch, index)
//   kResizeCenterCrop       Resize(round(side / 0.875)) of the shorter side + CenterCrop(side):
//                           ImageNet's evaluation transform (256 -> 224)
//   kStretch                Resize((side, side)), the aspect ratio not kept (as the in-memory
//                           imagefolder path stores images)
// A JPEG is decoded at the smallest libjpeg DCT scale of 1/8, 1/4, 1/2, 1 that keeps the crop at
// least side x side, and only the crop's rows and columns (data/image_codec.h), so a small crop of a
// large photo costs a fraction of a full decode.
//
// Data sets, both giving (class_names, train, test) indexes:
//   ListStreamingImageFolder  DIR/train/<class>/*.jpg|jpeg|png, DIR/test/<class>/... (as
//                             data/image_folder.h)
//   ListWebDataset            DIR/train/*.tar, DIR/test/*.tar (WebDataset shards): each sample
//                             is KEY.jpg|jpeg|png with KEY.cls (its integer label as text);
//                             other members are ignored. Class names: DIR/classes.txt (one per
//                             line, line K names label K) if present, else "0".."N-1" with N
//                             one above the largest training label.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "data/image_dataset.h"
#include "data/sample_source.h"

namespace mgpu {

// Where each sample's encoded bytes are.
struct EncodedSamples {
  struct Entry {
    int64_t offset = 0;  // in the file
    int64_t size = -1;   // bytes; -1: the whole file
    int32_t file = 0;    // index into files
  };
  std::vector<std::string> files;  // image files, or tar shards
  std::vector<Entry> entries;
  std::vector<int64_t> labels;     // one per entry

  int64_t size() const { return static_cast<int64_t>(entries.size()); }
};

struct EncodedDataset {
  std::vector<std::string> class_names;
  EncodedSamples train;
  EncodedSamples test;
};

// Both throw BadInputError saying what is wrong, where, and the layout expected.
EncodedDataset ListStreamingImageFolder(const std::string& folder);
EncodedDataset ListWebDataset(const std::string& folder);

enum class StreamTransform { kRandomResizedCropFlip, kResizeCenterCrop, kStretch };

struct StreamOptions {
  std::string name;  // for the log, e.g. "imagefolder/train"
  int64_t side = 224;
  StreamTransform transform = StreamTransform::kResizeCenterCrop;
  // An image that cannot be decoded: false stops the run (BadInputError); true replaces it by
  // the next decodable sample in index order (label included), the same in every epoch and on
  // every thread, and reports it once through TakeNewlySkipped().
  bool skip_bad_images = false;
  uint64_t seed = 0;
};

// The window kResizeCenterCrop takes from an image of `full` size, in its pixels.
Window CenterCropWindow(ImageSize full, int64_t side);

// What a sample's transform takes from an image of its full size: the window (in the full
// image's pixels) to resize to side x side, and whether to mirror the result.
struct CropPlan {
  Window window;
  bool flip = false;
};

class StreamingImages : public SampleSource {
 public:
  StreamingImages(EncodedSamples samples, std::vector<std::string> class_names, StreamOptions options);

  std::string name() const override { return options_.name; }
  int64_t size() const override { return samples_.size(); }
  int64_t channels() const override { return 3; }
  ImageSize image_size() const override { return ImageSize{options_.side, options_.side}; }
  const std::vector<std::string>& class_names() const override { return class_names_; }
  const std::vector<float>& mean() const override { return mean_; }
  const std::vector<float>& stddev() const override { return stddev_; }
  int64_t Load(int64_t index, int64_t epoch, uint8_t* out) const override;
  int64_t skipped() const override;
  std::vector<std::string> TakeNewlySkipped() const override;

  // Sample `index` alone, no replacement: "" when decoded into `out`, else what went wrong.
  std::string TryLoad(int64_t index, int64_t epoch, uint8_t* out) const;
  // The same from the sample's encoded bytes, read already (ReadEncoded).
  std::string TryDecode(int64_t index, int64_t epoch, const std::vector<uint8_t>& bytes, uint8_t* out) const;
  int64_t label(int64_t index) const { return samples_.labels[static_cast<size_t>(index)]; }
  // The sample's place for messages: its path, or its shard and byte offset.
  std::string Where(int64_t index) const;
  // The sample's encoded bytes. Throws BadInputError.
  std::vector<uint8_t> ReadEncoded(int64_t index) const;
  // The crop of sample `index` in `epoch` for an image of `full` size: the random draws TryLoad
  // makes, so a decoder on the device crops exactly as the CPU path does.
  CropPlan PlanCrop(int64_t index, int64_t epoch, ImageSize full) const;
  const StreamOptions& options() const { return options_; }
  // Counts an undecodable sample replaced under skip (a device decoder's finding), logged once.
  void RecordSkipped(int64_t index, const std::string& error) const;

 private:

  const EncodedSamples samples_;
  const std::vector<std::string> class_names_;
  const StreamOptions options_;
  const std::vector<float> mean_ = {0.485f, 0.456f, 0.406f};  // ImageNet's
  const std::vector<float> stddev_ = {0.229f, 0.224f, 0.225f};

  mutable std::mutex skipped_mutex_;
  mutable std::set<int64_t> skipped_;               // indices found undecodable
  mutable std::vector<std::string> newly_skipped_;  // their messages, until taken
};

// Every sample of `source` decoded into memory (e.g. with kStretch: the in-memory path of a
// WebDataset), by `threads` threads. Undecodable samples are left out with a line in
// `warnings` under skip, else a BadInputError lists them.
ImageDataset DecodeIntoMemory(const StreamingImages& source, bool skip_bad_images, int threads,
                              std::vector<std::string>& warnings);

}  // namespace mgpu
