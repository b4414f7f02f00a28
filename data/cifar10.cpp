#include "data/cifar10.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "data/out_of_memory.h"
#include "data/python_pickle.h"

namespace mgpu {
namespace {

constexpr const char* kFix =
    "download cifar-10-binary.tar.gz (or cifar-10-python.tar.gz, as torchvision does) from "
    "https://www.cs.toronto.edu/~kriz/cifar.html on a machine with network access, unpack it, and "
    "point --data-dir (or CIFAR10_DIR) at the folder it unpacked into";

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

ImageDataset ReadBinaryBatch(const std::string& path, int64_t records_per_file) {
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
        "(the MATLAB release is not read); {}",
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

ImageDataset ReadPythonBatch(const std::string& path, int64_t records_per_file) {
  if (records_per_file < 1) throw std::invalid_argument("records_per_file must be at least 1");
  if (!IsRegularFile(path)) {
    throw BadInputError(fmt::format("{}: file not found; expected a batch of CIFAR-10's Python release. {}", path, kFix));
  }
  const PickleRef batch = ReadPickle(ReadFile(path), path);
  if (batch->kind != PickleValue::Kind::kDict || !batch->Find("data") || !batch->Find("labels")) {
    throw BadInputError(fmt::format("{}: the pickle is not a CIFAR-10 batch (a dict with 'data' and 'labels'); "
                                    "the file is from another data set (CIFAR-100 has 'fine_labels'). {}", path, kFix));
  }
  const PickledArray pixels = AsUint8Array(batch->Find("data"), path, "'data'");
  if (pixels.shape != std::vector<int64_t>{records_per_file, kCifarImageBytes}) {
    throw BadInputError(fmt::format("{}: 'data' is {}; expected {}x{} (one row of 3x32x32 pixels per image). {}", path,
                                    fmt::join(pixels.shape, "x"), records_per_file, kCifarImageBytes, kFix));
  }
  const PickleRef labels = batch->Find("labels");
  if (labels->kind != PickleValue::Kind::kList || static_cast<int64_t>(labels->items.size()) != records_per_file) {
    throw BadInputError(fmt::format("{}: 'labels' is not a list of {} class numbers. {}", path, records_per_file, kFix));
  }
  ImageDataset result;
  result.name = path;
  result.images = torch::empty({records_per_file, 3, 32, 32}, torch::kUInt8);
  result.labels = torch::empty({records_per_file}, torch::kInt64);
  // Each row is already (C, H, W).
  std::memcpy(result.images.data_ptr<uint8_t>(), pixels.data.data(), pixels.data.size());
  int64_t* label_out = result.labels.data_ptr<int64_t>();
  for (int64_t r = 0; r < records_per_file; ++r) {
    const PickleRef& label = labels->items[static_cast<size_t>(r)];
    if (label->kind != PickleValue::Kind::kInt || label->integer < 0 ||
        label->integer >= static_cast<int64_t>(kClasses.size())) {
      throw BadInputError(fmt::format("{}: label {} of image {} is not a CIFAR-10 class (0-9). {}", path,
                                      label->kind == PickleValue::Kind::kInt ? std::to_string(label->integer) : "(not a number)",
                                      r, kFix));
    }
    label_out[r] = label->integer;
  }
  return result;
}

}  // namespace

ImageDataset ReadCifarBatch(const std::string& path, int64_t records_per_file) {
  return NameFileOnOutOfMemory(path, [&] { return ReadBinaryBatch(path, records_per_file); });
}

ImageDataset ReadCifarPythonBatch(const std::string& path, int64_t records_per_file) {
  return NameFileOnOutOfMemory(path, [&] { return ReadPythonBatch(path, records_per_file); });
}

TrainTestSplit LoadCifar10(const std::string& folder, int64_t records_per_file) {
  if (!IsDirectory(folder)) {
    throw BadInputError(fmt::format("data folder {} does not exist (data set cifar10); {}", folder, kFix));
  }
  // The folder itself, or the one an archive unpacks into; the binary release first.
  struct Release {
    std::string folder;
    std::string extension;
    ImageDataset (*read)(const std::string&, int64_t);
  };
  const std::vector<Release> releases = {{folder, ".bin", ReadCifarBatch},
                                         {folder + "/cifar-10-batches-bin", ".bin", ReadCifarBatch},
                                         {folder, "", ReadCifarPythonBatch},
                                         {folder + "/cifar-10-batches-py", "", ReadCifarPythonBatch}};
  const auto release = std::find_if(releases.begin(), releases.end(), [](const Release& r) {
    return IsRegularFile(r.folder + "/data_batch_1" + r.extension);
  });
  if (release == releases.end()) {
    throw BadInputError(fmt::format("{}: no CIFAR-10 batches (data_batch_1.bin, or data_batch_1 of the Python "
                                    "release) in this folder or in its cifar-10-batches-bin or cifar-10-batches-py "
                                    "sub-folder; {}", folder + "/data_batch_1.bin", kFix));
  }
  std::vector<ImageDataset> train_parts;
  for (int i = 1; i <= 5; ++i) {
    train_parts.push_back(release->read(fmt::format("{}/data_batch_{}{}", release->folder, i, release->extension),
                                        records_per_file));
  }
  const ImageDataset test = release->read(release->folder + "/test_batch" + release->extension, records_per_file);
  return TrainTestSplit{Concatenate("cifar10/train", train_parts), Concatenate("cifar10/test", {test}), release->folder};
}

}  // namespace mgpu
