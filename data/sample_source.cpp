#include "data/sample_source.h"

#include <cstring>

namespace mgpu {

InMemorySamples::InMemorySamples(const ImageDataset& dataset, std::shared_ptr<const Augmentation> augmentation,
                                 std::shared_ptr<const void> owner)
    : owner_(std::move(owner)),
      dataset_(dataset),
      augmentation_(augmentation && !augmentation->identity() ? std::move(augmentation) : nullptr) {
  const ImageSize stored{dataset_.height(), dataset_.width()};
  out_size_ = augmentation_ ? augmentation_->OutputSize(stored) : stored;
}

int64_t InMemorySamples::Load(int64_t index, int64_t epoch, uint8_t* out) const {
  const ImageSize stored{dataset_.height(), dataset_.width()};
  const int64_t channels = dataset_.channels();
  const uint8_t* pixels = dataset_.images.data_ptr<uint8_t>() + index * channels * stored.height * stored.width;
  if (augmentation_) {
    augmentation_->Apply(pixels, channels, stored, epoch, index, out);
  } else {
    std::memcpy(out, pixels, static_cast<size_t>(channels * stored.height * stored.width));
  }
  return dataset_.labels.data_ptr<int64_t>()[index];
}

}  // namespace mgpu
