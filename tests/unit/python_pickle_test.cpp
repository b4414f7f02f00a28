// Specification of the pickle reader and of CIFAR-10's Python release (the one torchvision
// downloads): batches pickled by Python 2 (as the release was) and by Python 3 at protocol 2 load
// with the pixels and labels they hold; every kind of damage is a BadInputError naming the file
// and what is wrong, and nothing in a pickle is ever called.
#include <gtest/gtest.h>

#include <string>

#include "common/files.h"
#include "data/cifar10.h"
#include "data/python_pickle.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace std::string_literals;  // pickles hold NUL bytes
using testing::BadInputMessage;
using testing::TempDir;
using testing::WriteBytes;

std::string Le32(uint32_t value) {
  std::string bytes;
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
  return bytes;
}

// A pickle of a CIFAR-10 batch of `labels.size()` images, written as Python 2's cPickle writes
// protocol 2 (str as BINSTRING), or with the pixels as Python 3 writes bytes at protocol 2
// (`_codecs.encode(latin-1 text, 'latin1')`). Pixel p of image r is (r * 7 + p) % 256.
std::string CifarBatchPickle(const std::vector<int>& labels, bool python3_bytes = false,
                             const std::string& dtype = "u1") {
  const auto images = static_cast<uint32_t>(labels.size());
  std::string pixels;
  for (uint32_t r = 0; r < images; ++r) {
    for (int p = 0; p < kCifarImageBytes; ++p) pixels.push_back(static_cast<char>((r * 7 + p) % 256));
  }
  std::string data;
  if (python3_bytes) {
    std::string utf8;
    for (const char c : pixels) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x80) {
        utf8.push_back(static_cast<char>(byte));
      } else {
        utf8.push_back(static_cast<char>(0xC0 | (byte >> 6)));
        utf8.push_back(static_cast<char>(0x80 | (byte & 0x3F)));
      }
    }
    data = "c_codecs\nencode\nX"s + Le32(static_cast<uint32_t>(utf8.size())) + utf8 + "X"s + Le32(6) + "latin1\x86R"s;
  } else {
    data = "T" + Le32(static_cast<uint32_t>(pixels.size())) + pixels;
  }
  std::string label_list = "](";
  for (const int label : labels) label_list += "K" + std::string(1, static_cast<char>(label));
  label_list += "e";
  const std::string dtype_object = "cnumpy\ndtype\nq\x05U"s + std::string(1, static_cast<char>(dtype.size())) + dtype +
                                   "K\x00K\x01\x87Rq\x06(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"s;
  return "\x80\x02}q\x00("s + "U\x04"s + "dataq\x01"s + "cnumpy.core.multiarray\n_reconstruct\nq\x02"s +
         "cnumpy\nndarray\nq\x03K\x00\x85U\x01"s + "b\x87Rq\x04"s + "(K\x01K"s +
         std::string(1, static_cast<char>(images)) + "M\x00\x0c\x86"s + dtype_object + "\x89"s + data + "tb"s +
         "U\x06labelsq\x07"s + label_list + "U\x0b"s + "batch_labelU\x0etraining batch"s + "u."s;
}

TEST(PythonPickle, ReadsACifarBatchAsPython2PickledIt) {
  TempDir dir;
  WriteBytes(dir / "data_batch_1", CifarBatchPickle({3, 9}));
  const ImageDataset batch = ReadCifarPythonBatch(dir / "data_batch_1", 2);
  ASSERT_EQ(batch.images.sizes(), (std::vector<int64_t>{2, 3, 32, 32}));
  EXPECT_EQ(batch.labels[0].item<int64_t>(), 3);
  EXPECT_EQ(batch.labels[1].item<int64_t>(), 9);
  // Row-major (C, H, W): pixel 1024 of image 1 is green's first.
  EXPECT_EQ(batch.images[1][1][0][0].item<int>(), (7 + 1024) % 256);
  EXPECT_EQ(batch.images[0][2][31][31].item<int>(), 3071 % 256);
}

TEST(PythonPickle, ReadsBytesThatPython3PickledAtProtocol2AsLatin1Text) {
  TempDir dir;
  WriteBytes(dir / "test_batch", CifarBatchPickle({0, 5, 1}, /*python3_bytes=*/true));
  const ImageDataset batch = ReadCifarPythonBatch(dir / "test_batch", 3);
  EXPECT_EQ(batch.images[2][0][6][8].item<int>(), (14 + 6 * 32 + 8) % 256);
  EXPECT_EQ(batch.images[1][0][4][0].item<int>(), (7 + 128) % 256) << "a byte of 0x80 and above";
}

TEST(PythonPickle, RecordsCallsOfGlobalsWithoutMakingThem) {
  // os.system('rm -rf /'): recorded as a call, never run.
  const PickleRef value = ReadPickle("\x80\x02"s + "cos\nsystem\nX\x08\x00\x00\x00rm -rf /\x85R."s, "evil.pkl");
  ASSERT_EQ(value->kind, PickleValue::Kind::kCall);
  EXPECT_EQ(value->callable->text, "os.system");
  EXPECT_EQ(value->items.at(0)->text, "rm -rf /");
}

TEST(PythonPickle, DamageIsAnErrorNamingTheFileAndTheOffset) {
  const std::string whole = CifarBatchPickle({1, 2});
  EXPECT_NE(BadInputMessage([&] { ReadPickle(whole.substr(0, 100), "cut.pkl"); }).find("cut.pkl: "), std::string::npos);
  EXPECT_NE(BadInputMessage([&] { ReadPickle(whole.substr(0, whole.size() - 1), "end.pkl"); })
                .find("ends before its STOP opcode (truncated file)"),
            std::string::npos);
  EXPECT_NE(BadInputMessage([&] { ReadPickle("\x80\x02\xff."s, "odd.pkl"); })
                .find("odd.pkl: not a readable Python pickle of data: opcode 0xff ('?') is not one that data "
                      "pickles use (at byte 2)"),
            std::string::npos);
  EXPECT_NE(BadInputMessage([&] { ReadPickle("h\x05."s, "memo.pkl"); }).find("GET of memo entry 5, which was never PUT"),
            std::string::npos);
}

TEST(PythonPickle, DeeplyNestedValuesAreAnErrorNamingTheFileNotACrash) {
  // 300,000 tuples each holding the last: freeing them recursively overflowed the stack.
  TempDir dir;
  WriteBytes(dir / "data_batch_1", "\x80\x02N"s + std::string(300000, '\x85') + "."s);
  const std::string message = BadInputMessage([&] { ReadCifarPythonBatch(dir / "data_batch_1", 2); });
  EXPECT_NE(message.find(dir / "data_batch_1" + ": not a readable Python pickle of data: values nest more than 100 deep"),
            std::string::npos)
      << message;
  // At the bound a value still reads, and is freed without recursion.
  const PickleRef nested = ReadPickle("N"s + std::string(kMaxPickleDepth - 1, '\x85') + "."s, "deep.pkl");
  EXPECT_EQ(nested->depth, kMaxPickleDepth);
}

TEST(PythonPickle, AContainerCannotHoldItselfOrChangeOnceHeld) {
  EXPECT_NE(BadInputMessage([&] { ReadPickle("]q\x00h\x00" "a."s, "self.pkl"); }).find("APPENDS puts a list inside itself"),
            std::string::npos);
  // The list, memoized, goes into a tuple and is then appended to through the memo.
  EXPECT_NE(BadInputMessage([&] { ReadPickle("]q\x00\x85h\x00Na."s, "held.pkl"); })
                .find("APPENDS changes a container that another value already holds"),
            std::string::npos);
}

TEST(PythonPickle, MemoReferencesCannotBuildFarMoreThanTheFileHolds) {
  // A memoized tuple of 100,000 Nones passed to a call 300 times: each REDUCE copies the
  // arguments, 1.6 MB each, from 5 bytes of pickle.
  const std::string pickle = "("s + std::string(100000, 'N') + "tq\x00" "cm\nf\nq\x01"s + [] {
    std::string calls;
    for (int i = 0; i < 300; ++i) calls += "h\x01h\x00R"s;
    return calls;
  }() + "."s;
  const std::string message = BadInputMessage([&] { ReadPickle(pickle, "bomb.pkl"); });
  EXPECT_NE(message.find("bomb.pkl: not a readable Python pickle of data: the pickle builds more than"), std::string::npos)
      << message;
}

TEST(PythonPickle, ABatchOfAnotherShapeTypeOrLabelSetIsRejectedSayingWhy) {
  TempDir dir;
  WriteBytes(dir / "floats", CifarBatchPickle({1, 2}, false, "<f4"));
  EXPECT_NE(BadInputMessage([&] { ReadCifarPythonBatch(dir / "floats", 2); }).find("'data' is not a numpy uint8 array: "
                                                                                  "its dtype is not uint8"),
            std::string::npos);
  WriteBytes(dir / "three", CifarBatchPickle({1, 2, 3}));
  EXPECT_NE(BadInputMessage([&] { ReadCifarPythonBatch(dir / "three", 2); }).find("'data' is 3x3072; expected 2x3072"),
            std::string::npos);
  WriteBytes(dir / "label", CifarBatchPickle({1, 12}));
  EXPECT_NE(BadInputMessage([&] { ReadCifarPythonBatch(dir / "label", 2); }).find("label 12 of image 1 is not a CIFAR-10 class"),
            std::string::npos);
  WriteBytes(dir / "other", "\x80\x02}q\x00U\x0b"s + "fine_labels]s."s);
  EXPECT_NE(BadInputMessage([&] { ReadCifarPythonBatch(dir / "other", 2); }).find("is not a CIFAR-10 batch"),
            std::string::npos);
}

TEST(PythonPickle, Cifar10LoadsThePythonReleaseFromTorchvisionsRootFolder) {
  TempDir root;
  const std::string release = root / "cifar-10-batches-py";
  MakeDirectories(release);
  for (int i = 1; i <= 5; ++i) WriteBytes(release + "/data_batch_" + std::to_string(i), CifarBatchPickle({i, 0}));
  WriteBytes(release + "/test_batch", CifarBatchPickle({7, 8}));
  const TrainTestSplit data = LoadCifar10(root.path(), 2);
  EXPECT_EQ(data.folder, release);
  EXPECT_EQ(data.train.size(), 10);
  EXPECT_EQ(data.test.size(), 2);
  EXPECT_EQ(data.train.labels[4].item<int64_t>(), 3);
  EXPECT_EQ(data.test.class_names.at(8), "ship");
}

TEST(PythonPickle, Cifar10WithNeitherReleaseNamesBothLayouts) {
  TempDir root;
  const std::string message = BadInputMessage([&] { LoadCifar10(root.path(), 2); });
  EXPECT_NE(message.find("no CIFAR-10 batches (data_batch_1.bin, or data_batch_1 of the Python release)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("cifar-10-python.tar.gz"), std::string::npos) << message;
}

}  // namespace
}  // namespace mgpu
