// Specification of the IDX reader and the MNIST-like loader: valid files in both encodings
// load; every kind of damage is a BadInputError that names the file and what is wrong.
#include <gtest/gtest.h>

#include "common/files.h"
#include "common/status.h"
#include "data/idx_reader.h"
#include "data/image_dataset.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(IdxReader, ReadsRawAndGzipFiles) {
  TempDir dir;
  const std::string body = IdxBytes({2, 2, 3}, std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c", 12));
  WriteBytes(dir / "raw", body);
  WriteGzip(dir / "packed.gz", body);
  for (const std::string& path : {dir / "raw", dir / "packed.gz"}) {
    IdxArray array = ReadIdxFile(path, 3);
    EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 2, 3}));
    ASSERT_EQ(array.data.size(), 12u);
    EXPECT_EQ(array.data[0], 1);
    EXPECT_EQ(array.data[11], 12);
  }
}

TEST(IdxReader, MissingFileNamesThePath) {
  TempDir dir;
  const std::string message = BadInputMessage([&] { ReadIdxFile(dir / "nope.gz", 1); });
  EXPECT_NE(message.find(dir / "nope.gz"), std::string::npos) << message;
  EXPECT_NE(message.find("not found"), std::string::npos) << message;
}

TEST(IdxReader, WrongMagicSaysWhatWasExpected) {
  TempDir dir;
  WriteBytes(dir / "bad", std::string("\x00\x00\x0d\x01\x00\x00\x00\x01\x05", 9));
  const std::string message = BadInputMessage([&] { ReadIdxFile(dir / "bad", 1); });
  EXPECT_NE(message.find("wrong magic number 00 00 0d 01"), std::string::npos) << message;
  EXPECT_NE(message.find("expected 00 00 08 01"), std::string::npos) << message;
}

TEST(IdxReader, WrongRankIsRejected) {
  TempDir dir;
  WriteBytes(dir / "labels", IdxBytes({3}, "abc"));
  EXPECT_NE(BadInputMessage([&] { ReadIdxFile(dir / "labels", 3); }).find("wrong magic"), std::string::npos);
}

TEST(IdxReader, TruncatedDataReportsDeclaredAndFoundSizes) {
  TempDir dir;
  WriteGzip(dir / "short.gz", IdxBytes({4, 2, 2}, std::string(10, 'x')));
  const std::string message = BadInputMessage([&] { ReadIdxFile(dir / "short.gz", 3); });
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(message.find("4x2x2 = 16 data bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("holds 10"), std::string::npos) << message;
}

TEST(IdxReader, AHeaderDeclaringMoreThanTheFileHoldsIsRefusedBeforeAllocating) {
  // 16 bytes declaring 8192x512x512 (2 GiB): refused from the file's size, raw or gzip.
  TempDir dir;
  const std::string header = IdxBytes({8192, 512, 512}, "");
  WriteBytes(dir / "raw", header);
  WriteGzip(dir / "packed.gz", header);
  const long long rss_before = PeakRssBytes();
  std::string message = BadInputMessage([&] { ReadIdxFile(dir / "raw", 3); });
  EXPECT_NE(message.find(dir / "raw" + ": truncated: the header declares 8192x512x512 = 2147483648 data bytes but the "
                                     "file holds 0 after its 16-byte header (16 bytes in all)"),
            std::string::npos)
      << message;
  message = BadInputMessage([&] { ReadIdxFile(dir / "packed.gz", 3); });
  EXPECT_NE(message.find(dir / "packed.gz" + ": truncated: the header declares 8192x512x512 = 2147483648 data bytes but the "
                                           "compressed file has"),
            std::string::npos)
      << message;
  EXPECT_LT(PeakRssBytes() - rss_before, 256LL << 20) << "the declared size was allocated";
}

TEST(IdxReader, DimensionsWhoseProductOverflowsAreRefused) {
  // Found by tests/fuzz (fuzz_idx): the product of the dimensions overflowed int64 (UB).
  TempDir dir;
  WriteBytes(dir / "huge", IdxBytes({4269311879, 2273806215, 2}, ""));
  const std::string message = BadInputMessage([&] { ReadIdxFile(dir / "huge", 3); });
  EXPECT_NE(message.find(dir / "huge" + ": header declares more than 17179869184 elements"), std::string::npos) << message;
}

TEST(IdxReader, TruncatedHeaderAndEmptyFile) {
  TempDir dir;
  WriteBytes(dir / "empty", "");
  WriteBytes(dir / "header", std::string("\x00\x00\x08\x03\x00\x00", 6));
  EXPECT_NE(BadInputMessage([&] { ReadIdxFile(dir / "empty", 3); }).find("truncated"), std::string::npos);
  EXPECT_NE(BadInputMessage([&] { ReadIdxFile(dir / "header", 3); }).find("truncated in the header"),
            std::string::npos);
}

TEST(IdxReader, TrailingBytesAreAnError) {
  TempDir dir;
  WriteBytes(dir / "long", IdxBytes({2}, "abcd"));
  EXPECT_NE(BadInputMessage([&] { ReadIdxFile(dir / "long", 1); }).find("2 bytes after the 2 data bytes"),
            std::string::npos);
}

TEST(IdxReader, CorruptGzipStreamIsAnError) {
  TempDir dir;
  WriteGzip(dir / "ok.gz", IdxBytes({64}, std::string(64, 'z')));
  std::string bytes = ReadText(dir / "ok.gz");
  bytes.resize(bytes.size() - 12);  // cut the deflate stream and its trailer
  bytes += "garbage-tail";
  WriteBytes(dir / "corrupt.gz", bytes);
  EXPECT_THROW(ReadIdxFile(dir / "corrupt.gz", 1), BadInputError);
}

TEST(MnistLike, LoadsBothSplitsWithShapesAndClassNames) {
  TempDir dir;
  WriteTinyMnistLike(dir.path(), 30, 20);
  TrainTestSplit data = LoadMnistLike("fashion-mnist", dir.path());
  EXPECT_EQ(data.train.images.sizes(), (std::vector<int64_t>{30, 1, 28, 28}));
  EXPECT_EQ(data.test.size(), 20);
  EXPECT_EQ(data.train.labels[13].item<int64_t>(), 3);
  EXPECT_EQ(data.train.class_names[9], "Ankle boot");
}

TEST(MnistLike, CountMismatchBetweenImagesAndLabelsNamesBothFiles) {
  TempDir dir;
  WriteTinyMnistLike(dir.path(), 10, 10);
  WriteGzip(dir / "train-labels-idx1-ubyte.gz", IdxBytes({9}, std::string(9, '\x01')));
  const std::string message = BadInputMessage([&] { LoadMnistLike("mnist", dir.path()); });
  EXPECT_NE(message.find("10 images"), std::string::npos) << message;
  EXPECT_NE(message.find("9 labels"), std::string::npos) << message;
}

TEST(MnistLike, OutOfRangeLabelIsAnError) {
  TempDir dir;
  WriteTinyMnistLike(dir.path(), 10, 10);
  WriteGzip(dir / "t10k-labels-idx1-ubyte.gz", IdxBytes({10}, std::string(9, '\x01') + "\x0b"));
  EXPECT_NE(BadInputMessage([&] { LoadMnistLike("mnist", dir.path()); }).find("label 11 at index 9"),
            std::string::npos);
}

TEST(MnistLike, MissingFolderAndMissingFileAreErrors) {
  TempDir dir;
  EXPECT_NE(BadInputMessage([&] { LoadMnistLike("fashion-mnist", dir / "absent"); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(BadInputMessage([&] { LoadMnistLike("mnist", dir.path()); }).find("data file missing"),
            std::string::npos);
}

}  // namespace
}  // namespace mgpu
