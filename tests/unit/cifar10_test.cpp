// Specification of the CIFAR-10 reader and of LoadDataset's dispatch: valid batch files load
// with the right pixels, labels, classes and statistics; every kind of damage is a
// BadInputError naming the file, what is wrong and what was expected.
#include <gtest/gtest.h>


#include "common/files.h"
#include "common/status.h"
#include "data/cifar10.h"
#include "data/datasets.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

constexpr int64_t kRecords = 4;  // per file in these fixtures; real files hold 10000

// `records` records; record r has label labels[r % size] and every pixel of channel c equal to
// first_pixel + r + c.
std::string CifarBytes(int64_t records, const std::vector<int>& labels, int first_pixel) {
  std::string bytes;
  for (int64_t r = 0; r < records; ++r) {
    bytes.push_back(static_cast<char>(labels[static_cast<size_t>(r) % labels.size()]));
    for (int c = 0; c < 3; ++c) bytes.append(1024, static_cast<char>(first_pixel + r + c));
  }
  return bytes;
}

void WriteCifarFolder(const std::string& folder) {
  for (int i = 1; i <= 5; ++i) {
    WriteBytes(folder + "/data_batch_" + std::to_string(i) + ".bin", CifarBytes(kRecords, {i, 9}, 10 * i));
  }
  WriteBytes(folder + "/test_batch.bin", CifarBytes(kRecords, {0, 3}, 100));
}

TEST(Cifar10, LoadsFiveTrainingBatchesAndTheTestBatch) {
  TempDir dir;
  WriteCifarFolder(dir.path());
  const TrainTestSplit data = LoadCifar10(dir.path(), kRecords);
  EXPECT_EQ(data.train.images.sizes(), (std::vector<int64_t>{5 * kRecords, 3, 32, 32}));
  EXPECT_EQ(data.test.images.sizes(), (std::vector<int64_t>{kRecords, 3, 32, 32}));
  // Batch 2, record 1: label 9, channel c filled with 20 + 1 + c.
  EXPECT_EQ(data.train.labels[kRecords + 1].item<int64_t>(), 9);
  EXPECT_EQ(data.train.labels[kRecords].item<int64_t>(), 2);
  EXPECT_EQ(data.train.images[kRecords + 1][0][0][0].item<int>(), 21);
  EXPECT_EQ(data.train.images[kRecords + 1][2][31][31].item<int>(), 23);
  EXPECT_EQ(data.test.labels[1].item<int64_t>(), 3);
  EXPECT_EQ(data.train.class_names.front(), "airplane");
  EXPECT_EQ(data.train.class_names.back(), "truck");
  EXPECT_EQ(data.train.num_classes(), 10);
  EXPECT_FLOAT_EQ(data.train.mean[0], 0.4914f);
  EXPECT_FLOAT_EQ(data.test.stddev[2], 0.2616f);
}

TEST(Cifar10, FindsTheBatchesInTheUnpackedArchivesSubfolder) {
  TempDir dir;
  MakeDirectories(dir / "cifar-10-batches-bin");
  WriteCifarFolder(dir / "cifar-10-batches-bin");
  EXPECT_EQ(LoadCifar10(dir.path(), kRecords).folder, dir / "cifar-10-batches-bin");
}

TEST(Cifar10, MissingFileNamesItAndSaysWhereToGetIt) {
  TempDir dir;
  WriteCifarFolder(dir.path());
  RemovePath(dir / "data_batch_3.bin");
  const std::string message = BadInputMessage([&] { LoadCifar10(dir.path(), kRecords); });
  EXPECT_NE(message.find(dir / "data_batch_3.bin" + ": file not found"), std::string::npos) << message;
  EXPECT_NE(message.find("--data-dir"), std::string::npos) << message;
}

TEST(Cifar10, SizeThatIsNotWholeRecordsIsRejected) {
  TempDir dir;
  WriteBytes(dir / "cut.bin", CifarBytes(kRecords, {1}, 0).substr(0, 3 * kCifarRecordBytes + 100));
  const std::string message = BadInputMessage([&] { ReadCifarBatch(dir / "cut.bin", kRecords); });
  EXPECT_NE(message.find(dir / "cut.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("9319 bytes is not a whole number of 3073-byte records"), std::string::npos) << message;
  EXPECT_NE(message.find("expected 12292 bytes (4 records)"), std::string::npos) << message;
}

TEST(Cifar10, WrongRecordCountIsRejected) {
  TempDir dir;
  WriteBytes(dir / "short.bin", CifarBytes(kRecords - 1, {1}, 0));
  const std::string message = BadInputMessage([&] { ReadCifarBatch(dir / "short.bin", kRecords); });
  EXPECT_NE(message.find("holds 3 records (9219 bytes); expected 4 records (12292 bytes)"), std::string::npos)
      << message;
  // The real layout: 10000 records per file.
  const std::string real = BadInputMessage([&] { ReadCifarBatch(dir / "short.bin"); });
  EXPECT_NE(real.find("expected 10000 records (30730000 bytes)"), std::string::npos) << real;
}

TEST(Cifar10, LabelAboveNineIsRejectedWithItsRecord) {
  TempDir dir;
  std::string bytes = CifarBytes(kRecords, {1}, 0);
  bytes[2 * kCifarRecordBytes] = 10;
  WriteBytes(dir / "bad_label.bin", bytes);
  const std::string message = BadInputMessage([&] { ReadCifarBatch(dir / "bad_label.bin", kRecords); });
  EXPECT_NE(message.find(dir / "bad_label.bin" + ": label 10 in record 2"), std::string::npos) << message;
  EXPECT_NE(message.find("labels are 0-9"), std::string::npos) << message;
}

TEST(LoadDataset, DispatchesOnTheName) {
  TempDir dir;
  WriteTinyMnistLike(dir.path(), 20, 10);
  const TrainTestSplit mnist = LoadDataset("mnist", dir.path(), DatasetOptions{});
  EXPECT_EQ(mnist.train.size(), 20);
  EXPECT_EQ(mnist.train.channels(), 1);
  DatasetOptions synthetic;
  synthetic.synthetic_train = 7;
  synthetic.synthetic_test = 3;
  synthetic.image_size = 16;
  const TrainTestSplit generated = LoadDataset("synthetic", "", synthetic);
  EXPECT_EQ(generated.train.images.sizes(), (std::vector<int64_t>{7, 3, 16, 16}));
  EXPECT_EQ(generated.test.size(), 3);
  const std::string message = BadInputMessage([&] { LoadDataset("imagenet", dir.path(), DatasetOptions{}); });
  EXPECT_NE(message.find("unknown data set 'imagenet'"), std::string::npos) << message;
  EXPECT_NE(message.find("cifar10, imagefolder, synthetic"), std::string::npos) << message;
}

TEST(LoadDataset, Cifar10WithoutAFolderSaysToPassDataDir) {
  const char* saved = std::getenv("CIFAR10_DIR");
  const std::string saved_value = saved ? saved : "";
  ::unsetenv("CIFAR10_DIR");
  const std::string message = BadInputMessage([] { DefaultDataDir("cifar10"); });
  if (saved) ::setenv("CIFAR10_DIR", saved_value.c_str(), 1);
  EXPECT_NE(message.find("--data-dir"), std::string::npos) << message;
  EXPECT_NE(message.find("CIFAR10_DIR"), std::string::npos) << message;
}

TEST(SyntheticDataset, IsAPureFunctionOfTheSeed) {
  const TrainTestSplit a = MakeSyntheticDataset(300, 50, 32, 7);
  const TrainTestSplit b = MakeSyntheticDataset(300, 50, 32, 7);
  const TrainTestSplit c = MakeSyntheticDataset(300, 50, 32, 8);
  EXPECT_TRUE(torch::equal(a.train.images, b.train.images));
  EXPECT_TRUE(torch::equal(a.train.labels, b.train.labels));
  EXPECT_TRUE(torch::equal(a.test.images, b.test.images));
  EXPECT_FALSE(torch::equal(a.train.images, c.train.images));
  EXPECT_FALSE(torch::equal(a.train.labels, c.train.labels));
  // Train and test are different draws.
  EXPECT_FALSE(torch::equal(a.train.images.slice(0, 0, 50), a.test.images));
}

TEST(SyntheticDataset, GrayscaleImagesHaveOneChannelAndItsStatistics) {
  const TrainTestSplit data = MakeSyntheticDataset(100, 10, 28, 1, /*channels=*/1);
  EXPECT_EQ(data.train.images.sizes(), (std::vector<int64_t>{100, 1, 28, 28}));
  EXPECT_EQ(data.test.images.sizes(), (std::vector<int64_t>{10, 1, 28, 28}));
  EXPECT_EQ(data.train.channels(), 1);
  EXPECT_EQ(data.train.mean.size(), 1u);
  EXPECT_EQ(data.train.stddev.size(), 1u);
  EXPECT_THROW(MakeSyntheticDataset(100, 10, 28, 1, /*channels=*/2), BadInputError);
}

TEST(SyntheticDataset, LooksLikeUniformNoiseOverTenClasses) {
  const TrainTestSplit data = MakeSyntheticDataset(2000, 10, 32, 1);
  EXPECT_EQ(data.train.num_classes(), 10);
  EXPECT_EQ(data.train.channels(), 3);
  EXPECT_EQ(data.train.labels.min().item<int64_t>(), 0);
  EXPECT_EQ(data.train.labels.max().item<int64_t>(), 9);
  const double mean = data.train.images.to(torch::kDouble).mean().item<double>() / 255.0;
  const double stddev = data.train.images.to(torch::kDouble).std().item<double>() / 255.0;
  EXPECT_NEAR(mean, data.train.mean[0], 0.005);
  EXPECT_NEAR(stddev, data.train.stddev[0], 0.005);
}

}  // namespace
}  // namespace mgpu
