#include "data/cifar10.h"

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"

namespace mgpu {
namespace {

constexpr const char* kFix =
    "download cifar-10-binary.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html on a "
    "machine with network access, unpack it, and point --data-dir (or CIFAR10_DIR) at its "
    "cifar-10-batches-bin folder";

const std::vector<std::string> kClasses = {"airplane", "automobile", "bird",  "cat",  "deer",
                                           "dog",      "frog",       "horse", "ship", "truck"};

ImageDataset Concatenate(const std::string& name, const std::vector<ImageDataset>& parts) {
  std::vector<torch::Tensor> images, labels;
  for (const auto& part : parts) {
    images.push_back(part.images);
    labels.push_back(part.labels);
  }
  ImageDataset all;
  all.name = name;
  all.images = torch::cat(images);
  all.labels = torch::cat(labels);
  all.class_names = kClasses;
  all.mean = {0.4914f, 0.4822f, 0.4465f};
  all.stddev = {0.2470f, 0.2435f, 0.2616f};
  return all;
}

}  // namespace

ImageDataset ReadCifarBatch(const std::string& path, int64_t records_per_file) {
  if (records_per_file < 1) throw std::invalid_argument("records_per_file must be at least 1");
  if (!IsRegularFile(path)) {
    throw BadInputError(fmt::format("{}: file not found; expected a CIFAR-10 binary batch of {} "
                                    "records ({} bytes). {}",
                                    path, records_per_file, records_per_file * kCifarRecordBytes, kFix));
  }
  const int64_t size = FileSize(path);
  if (size < 0) throw BadInputError(fmt::format("{}: cannot read its size: {}", path, std::strerror(errno)));
  if (size % kCifarRecordBytes != 0) {
    throw BadInputError(fmt::format(
        "{}: {} bytes is not a whole number of {}-byte records (1 label byte + {} pixel bytes); "
        "expected {} bytes ({} records). The file is truncated or not a CIFAR-10 binary batch "
        "(the Python and MATLAB releases are not read); {}",
        path, size, kCifarRecordBytes, kCifarImageBytes, records_per_file * kCifarRecordBytes,
        records_per_file, kFix));
  }
  if (size / kCifarRecordBytes != records_per_file) {
    throw BadInputError(fmt::format("{}: holds {} records ({} bytes); expected {} records ({} "
                                    "bytes). The file is truncated or from another data set; {}",
                                    path, size / kCifarRecordBytes, size, records_per_file,
                                    records_per_file * kCifarRecordBytes, kFix));
  }
  std::vector<char> bytes(static_cast<size_t>(size));
  std::ifstream in(path, std::ios::binary);
  if (!in.read(bytes.data(), size)) {
    throw BadInputError(fmt::format("{}: cannot read {} bytes: {}", path, size, std::strerror(errno)));
  }
  ImageDataset batch;
  batch.name = path;
  batch.images = torch::empty({records_per_file, 3, 32, 32}, torch::kUInt8);
  batch.labels = torch::empty({records_per_file}, torch::kInt64);
  uint8_t* pixels = batch.images.data_ptr<uint8_t>();
  int64_t* labels = batch.labels.data_ptr<int64_t>();
  for (int64_t r = 0; r < records_per_file; ++r) {
    const char* record = bytes.data() + r * kCifarRecordBytes;
    const auto label = static_cast<uint8_t>(record[0]);
    if (label >= kClasses.size()) {
      throw BadInputError(fmt::format("{}: label {} in record {} (byte offset {}) is out of range; "
                                      "CIFAR-10 labels are 0-9. The file is corrupt or from "
                                      "another data set (CIFAR-100's binary layout differs); {}",
                                      path, label, r, r * kCifarRecordBytes, kFix));
    }
    labels[r] = label;
    // The record's pixels are already (C, H, W).
    std::memcpy(pixels + r * kCifarImageBytes, record + 1, kCifarImageBytes);
  }
  return batch;
}

TrainTestSplit LoadCifar10(const std::string& folder, int64_t records_per_file) {
  if (!IsDirectory(folder)) {
    throw BadInputError(fmt::format("data folder {} does not exist (data set cifar10); {}", folder, kFix));
  }
  // Accept the folder the archive was unpacked into as well as cifar-10-batches-bin itself.
  std::string dir = folder;
  const std::string nested = folder + "/cifar-10-batches-bin";
  if (!PathExists(folder + "/data_batch_1.bin") && IsDirectory(nested)) {
    dir = nested;
  }
  std::vector<ImageDataset> train_parts;
  for (int i = 1; i <= 5; ++i) {
    train_parts.push_back(ReadCifarBatch(fmt::format("{}/data_batch_{}.bin", dir, i), records_per_file));
  }
  return TrainTestSplit{Concatenate("cifar10/train", train_parts),
                        Concatenate("cifar10/test", {ReadCifarBatch(dir + "/test_batch.bin", records_per_file)}),
                        dir};
}

}  // namespace mgpu
