// Specification of the streaming loader (--data-loading stream): the tar index (ustar, GNU long
// names, truncated and corrupt archives), the scaled and cropped JPEG decode against a full
// decode, RandomResizedCrop and centre-crop geometry, WebDataset indexing and its errors,
// --on-bad-image while streaming, batches independent of the number of loader threads, the
// bounded prefetch queue, and OpenDataset's choice between memory and stream.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <tuple>

#include <sys/stat.h>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "data/augment.h"
#include "data/batch_loader.h"
#include "data/counter_rng.h"
#include "data/datasets.h"
#include "data/image_codec.h"
#include "data/image_ops.h"
#include "data/streaming_images.h"
#include "data/tar_index.h"
#include "tests/support/image_files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

std::vector<uint8_t> ToChw(const DecodedImage& image) {
  const int64_t plane = image.height * image.width;
  std::vector<uint8_t> chw(static_cast<size_t>(3 * plane));
  for (int64_t p = 0; p < plane; ++p) {
    for (int64_t c = 0; c < 3; ++c) chw[static_cast<size_t>(c * plane + p)] = image.rgb[static_cast<size_t>(p * 3 + c)];
  }
  return chw;
}

TEST(TarIndex, ListsMembersWithOffsetsAndGnuLongNames) {
  TempDir dir;
  const std::string long_name = std::string(150, 'd') + "/sample.jpg";
  const std::string tar = TarEntry("a/1.cls", "7") + TarEntry(long_name, std::string(700, 'x')) +
                          TarEntry("a/2.cls", "12") + TarEnd();
  WriteBytes(dir / "s.tar", tar);
  const std::vector<TarMember> members = ReadTarIndex(dir / "s.tar");
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].name, "a/1.cls");
  EXPECT_EQ(members[0].offset, 512);
  EXPECT_EQ(members[0].size, 1);
  EXPECT_EQ(members[1].name, long_name) << "the GNU 'L' entry names the next member";
  EXPECT_EQ(members[1].size, 700);
  EXPECT_EQ(tar.substr(static_cast<size_t>(members[1].offset), 700), std::string(700, 'x'));
  EXPECT_EQ(members[2].name, "a/2.cls");
  EXPECT_EQ(tar.substr(static_cast<size_t>(members[2].offset), 2), "12");
}

TEST(TarIndex, TruncatedArchiveIsAnErrorNamingFileAndOffset) {
  TempDir dir;
  const std::string tar = TarEntry("a.jpg", std::string(2000, 'x')) + TarEntry("b.jpg", std::string(3000, 'y'));
  WriteBytes(dir / "cut.tar", tar.substr(0, tar.size() - 1000));
  const std::string message = BadInputMessage([&] { ReadTarIndex(dir / "cut.tar"); });
  EXPECT_NE(message.find(dir / "cut.tar"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  EXPECT_NE(message.find("byte 2560"), std::string::npos) << "the second header's offset: " << message;
}

TEST(TarIndex, CorruptHeaderIsAnErrorNamingTheOffset) {
  TempDir dir;
  std::string tar = TarEntry("a.cls", "1") + TarEntry("b.cls", "2") + TarEnd();
  tar[1024 + 3] ^= 0x55;  // the second header's name
  WriteBytes(dir / "bad.tar", tar);
  const std::string message = BadInputMessage([&] { ReadTarIndex(dir / "bad.tar"); });
  EXPECT_NE(message.find("corrupt tar header at byte 1024"), std::string::npos) << message;
  WriteBytes(dir / "not.tar", std::string(2048, 'z'));
  EXPECT_NE(BadInputMessage([&] { ReadTarIndex(dir / "not.tar"); }).find("byte 0"), std::string::npos);
}

TEST(TarIndex, NumericFieldsOutOfRangeAreErrorsNamingTheShardAndTheMember) {
  TempDir dir;
  // GNU base 256: 0x80, then 11 bytes of the number; 0xff first is negative. 2^63 - 1 fits an
  // int64 but overflowed offset + size into a negative read offset.
  const std::string huge = "\x80" + std::string(11, '\xff');
  const std::string negative(12, '\xff');
  const std::string largest = "\x80" + std::string(3, '\0') + "\x7f" + std::string(7, '\xff');
  for (const auto& [name, size_field, problem] :
       {std::tuple{"huge.tar", huge, ": corrupt tar header at byte 0 for member 'big.jpg': size field too large"},
        std::tuple{"negative.tar", negative, ": corrupt tar header at byte 0 for member 'big.jpg': size field negative"},
        std::tuple{"largest.tar", largest, ": truncated tar: the entry 'big.jpg' at byte 0 holds 9223372036854775807 bytes"}}) {
    std::string tar = TarEntry("big.jpg", "x") + TarEnd();
    std::copy(size_field.begin(), size_field.end(), tar.begin() + 124);
    std::fill(tar.begin() + 148, tar.begin() + 156, ' ');  // checksum of the changed header
    int sum = 0;
    for (int i = 0; i < 512; ++i) sum += static_cast<unsigned char>(tar[static_cast<size_t>(i)]);
    const std::string checksum = fmt::format("{:06o}", sum);
    std::copy(checksum.begin(), checksum.end(), tar.begin() + 148);
    tar[154] = '\0';
    WriteBytes(dir / name, tar);
    const std::string message = BadInputMessage([&, name = name] { ReadTarIndex(dir / name); });
    EXPECT_NE(message.find(dir / name + problem), std::string::npos) << message;
  }
}

// The streaming decode (DCT-scaled, only the crop's rows and columns) against the full decode
// then the same crop and resize: close, not equal (libjpeg's scaled IDCT is its own filter).
TEST(ImageCodec, ScaledCroppedJpegDecodeMatchesFullDecodeThenCrop) {
  const int width = 480, height = 360;
  const std::string jpeg = EncodeJpeg(width, height, TestPicture(width, height), 95);
  const auto* bytes = reinterpret_cast<const uint8_t*>(jpeg.data());
  const Window window{40, 70, 256, 300};
  const ImageSize out{56, 56};
  const DecodedRegion region =
      DecodeImageRegion(bytes, jpeg.size(), "test.jpg", [&](ImageSize full) {
        EXPECT_EQ(full, (ImageSize{height, width})) << "the window is chosen on the original size";
        return window;
      }, out);
  // 56 / 256 -> the smallest m/8 keeping 56 pixels is 2/8: 120 x 90, cropped to about 64 x 75.
  EXPECT_LT(region.image.width, width / 3) << "decoded at a reduced scale and cropped";
  EXPECT_LT(region.image.height, height / 3);
  EXPECT_GE(region.window.height, out.height);
  EXPECT_GE(region.window.width, out.width);
  std::vector<uint8_t> fast(3 * 56 * 56), reference(3 * 56 * 56);
  ResizeWindow(ToChw(region.image).data(), 3, ImageSize{region.image.height, region.image.width}, region.window,
               fast.data(), out, /*flip=*/false);
  const DecodedImage full = DecodeImageBytes(bytes, jpeg.size(), "test.jpg");
  ResizeWindow(ToChw(full).data(), 3, ImageSize{full.height, full.width}, window, reference.data(), out,
               /*flip=*/false);
  double total = 0;
  for (size_t i = 0; i < fast.size(); ++i) total += std::abs(fast[i] - reference[i]);
  EXPECT_LT(total / static_cast<double>(fast.size()), 3.0) << "mean absolute difference per channel value";

  // A crop needing the full resolution decodes at 8/8: the full decode's pixels, up to the
  // chroma upsampling at the cropped edges.
  const DecodedRegion exact = DecodeImageRegion(bytes, jpeg.size(), "test.jpg",
                                                [](ImageSize) { return Window{16, 32, 100, 120}; }, ImageSize{100, 120});
  ResizeWindow(ToChw(exact.image).data(), 3, ImageSize{exact.image.height, exact.image.width}, exact.window,
               fast.data(), out, /*flip=*/false);
  ResizeWindow(ToChw(full).data(), 3, ImageSize{full.height, full.width}, Window{16, 32, 100, 120}, reference.data(),
               out, /*flip=*/false);
  total = 0;
  for (size_t i = 0; i < fast.size(); ++i) total += std::abs(fast[i] - reference[i]);
  EXPECT_LT(total / static_cast<double>(fast.size()), 1.0);
}

TEST(ImageCodec, RegionDecodeOfCorruptDataIsABadInputError) {
  std::string jpeg = EncodeJpeg(64, 64, TestPicture(64, 64));
  jpeg.resize(jpeg.size() / 3);
  const std::string message = BadInputMessage([&] {
    DecodeImageRegion(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), "cut.jpg",
                      [](ImageSize full) { return Window{0, 0, full.height, full.width}; }, ImageSize{64, 64});
  });
  EXPECT_NE(message.find("cut.jpg"), std::string::npos) << message;
}

TEST(StreamGeometry, RandomResizedCropStaysInsideWithTorchvisionRanges) {
  int fallbacks = 0;
  for (uint64_t k = 0; k < 2000; ++k) {
    CounterRng rng(3, 0, k);
    const ImageSize size{300 + static_cast<int64_t>(k % 7) * 20, 500 - static_cast<int64_t>(k % 5) * 30};
    const Window w = DrawResizedCrop(rng, size);
    ASSERT_GE(w.top, 0);
    ASSERT_GE(w.left, 0);
    ASSERT_LE(w.top + w.height, size.height);
    ASSERT_LE(w.left + w.width, size.width);
    const double area = static_cast<double>(w.height * w.width) / static_cast<double>(size.height * size.width);
    const double ratio = static_cast<double>(w.width) / static_cast<double>(w.height);
    EXPECT_GE(area, 0.08 * 0.95);
    EXPECT_LE(area, 1.0);
    EXPECT_GE(ratio, 0.75 * 0.97);
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.03);
    if (w.height * w.width == size.height * size.width) ++fallbacks;
  }
  EXPECT_LT(fallbacks, 100) << "10 tries almost always find a window on ordinary photos";
  // 20 x 1000 (ratio 50): no try fits, so the centred crop of the largest ratio allowed, 4/3.
  CounterRng rng(3, 0, 0);
  const Window w = DrawResizedCrop(rng, ImageSize{20, 1000});
  EXPECT_EQ(w.height, 20);
  EXPECT_EQ(w.width, 27);
  EXPECT_EQ(w.left, (1000 - 27) / 2);
}

TEST(StreamGeometry, CenterCropIsResizeTo256ThenCrop224) {
  // 375 x 500: the shorter side becomes 256, so the 224 crop covers 224 * 375 / 256 = 328 pixels.
  const Window w = CenterCropWindow(ImageSize{375, 500}, 224);
  EXPECT_EQ(w.height, 328);
  EXPECT_EQ(w.width, 328);
  EXPECT_EQ(w.top, (375 - 328) / 2);
  EXPECT_EQ(w.left, (500 - 328) / 2);
}

class StreamingFolder : public ::testing::Test {
 protected:
  void SetUp() override { WriteColourImageFolder(dir_.path(), ColourSetOptions{3, 12, 4, 40, 90, 5}); }

  std::shared_ptr<const StreamingImages> Train(StreamTransform transform = StreamTransform::kRandomResizedCropFlip,
                                               bool skip = false) {
    EncodedDataset listing = ListStreamingImageFolder(dir_.path());
    return std::make_shared<const StreamingImages>(std::move(listing.train), listing.class_names,
                                                   StreamOptions{"imagefolder/train", 24, transform, skip, 9});
  }

  TempDir dir_;
};

std::vector<torch::Tensor> EpochBatches(const std::shared_ptr<const SampleSource>& source, int workers, int64_t epoch) {
  BatchLoader loader(source, LoaderOptions{5, workers, 2});
  std::vector<int64_t> order;
  for (int64_t i = source->size() - 1; i >= 0; --i) order.push_back(i);
  loader.StartEpoch(order, epoch);
  std::vector<torch::Tensor> out;
  while (auto batch = loader.Next()) {
    out.push_back(batch->images);
    out.push_back(batch->labels);
  }
  return out;
}

TEST_F(StreamingFolder, BatchesDependOnIndicesEpochAndSeedNotOnWorkers) {
  const auto source = Train();
  ASSERT_EQ(source->size(), 36);
  EXPECT_EQ(source->image_size(), (ImageSize{24, 24}));
  const std::vector<torch::Tensor> serial = EpochBatches(source, 0, 1);
  ASSERT_EQ(serial.size(), 2u * 8);  // 36 samples in batches of 5
  for (const int workers : {2, 4}) {
    const std::vector<torch::Tensor> threaded = EpochBatches(source, workers, 1);
    ASSERT_EQ(threaded.size(), serial.size());
    for (size_t i = 0; i < serial.size(); ++i) EXPECT_TRUE(torch::equal(serial[i], threaded[i])) << workers << " " << i;
  }
  const std::vector<torch::Tensor> other_epoch = EpochBatches(source, 2, 2);
  EXPECT_FALSE(torch::equal(serial[0], other_epoch[0])) << "another epoch draws other crops";
  EXPECT_TRUE(torch::equal(serial[1], other_epoch[1])) << "but the labels are the samples'";
}

TEST_F(StreamingFolder, PrefetchQueueIsBoundedByWorkersTimesPrefetch) {
  const auto source = Train();
  BatchLoader loader(source, LoaderOptions{2, 2, 2});  // 18 batches in the epoch
  std::vector<int64_t> order;
  for (int64_t i = 0; i < source->size(); ++i) order.push_back(i);
  loader.StartEpoch(order, 0);
  int64_t most = 0;
  for (int i = 0; i < 40; ++i) {  // nobody takes batches: the workers must stop at 2 x 2
    most = std::max(most, loader.prefetched());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(most, 4);
  int64_t delivered = 0;
  while (loader.Next()) {
    EXPECT_LE(loader.prefetched(), 4);
    ++delivered;
  }
  EXPECT_EQ(delivered, 18);
}

TEST_F(StreamingFolder, BadImagesFailNamingThePathOrAreReplacedByTheNextSample) {
  const std::string bad = dir_ / "train/class0/0003.jpg";
  WriteBytes(bad, "\xFF\xD8\xFF not really a jpeg");
  std::vector<uint8_t> pixels(3 * 24 * 24), next(3 * 24 * 24);
  const std::string message = BadInputMessage([&] { Train()->Load(3, 0, pixels.data()); });
  EXPECT_NE(message.find(bad), std::string::npos) << message;
  EXPECT_NE(message.find("--on-bad-image skip"), std::string::npos) << message;

  const auto skipping = Train(StreamTransform::kResizeCenterCrop, /*skip=*/true);
  EXPECT_EQ(skipping->Load(3, 0, pixels.data()), skipping->label(4));
  EXPECT_EQ(skipping->Load(4, 0, next.data()), skipping->label(4));
  EXPECT_EQ(pixels, next) << "sample 3 is replaced by sample 4, deterministically";
  skipping->Load(3, 1, pixels.data());
  EXPECT_EQ(skipping->skipped(), 1) << "each bad image counted once";
  const std::vector<std::string> reported = skipping->TakeNewlySkipped();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_NE(reported[0].find(bad), std::string::npos);
  EXPECT_TRUE(skipping->TakeNewlySkipped().empty());
}

// TryDecode (the CPU assist of --decode gpu, from bytes read already) decodes as TryLoad does, and
// reports a truncated stream without replacing or counting it (the device may still take it).
TEST_F(StreamingFolder, TryDecodeFromReadBytesIsTryLoadAndReplacesNothing) {
  const auto source = Train(StreamTransform::kRandomResizedCropFlip, /*skip=*/true);
  std::vector<uint8_t> loaded(3 * 24 * 24), decoded(3 * 24 * 24);
  for (int64_t i = 0; i < source->size(); i += 5) {
    ASSERT_EQ(source->TryLoad(i, 2, loaded.data()), "") << i;
    ASSERT_EQ(source->TryDecode(i, 2, source->ReadEncoded(i), decoded.data()), "") << i;
    EXPECT_EQ(decoded, loaded) << "sample " << i;
  }
  std::vector<uint8_t> truncated = source->ReadEncoded(3);
  truncated.resize(truncated.size() / 3);
  const std::string error = source->TryDecode(3, 0, truncated, decoded.data());
  EXPECT_NE(error.find(dir_ / "train/class0/0003.jpg"), std::string::npos) << error;
  EXPECT_EQ(source->skipped(), 0);
}

TEST_F(StreamingFolder, AFifoNamedLikeAnImageIsABadImageNotAReadThatBlocks) {
  const std::string fifo = dir_ / "train/class0/0003.jpg";
  ASSERT_TRUE(RemovePath(fifo));
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);  // open() would wait for a writer forever
  std::vector<uint8_t> pixels(3 * 24 * 24);
  const std::string message = BadInputMessage([&] { Train()->Load(3, 0, pixels.data()); });
  EXPECT_NE(message.find(fifo + ": a FIFO (named pipe), not a regular file"), std::string::npos) << message;
  const auto skipping = Train(StreamTransform::kResizeCenterCrop, /*skip=*/true);
  EXPECT_EQ(skipping->Load(3, 0, pixels.data()), skipping->label(4));
  EXPECT_EQ(skipping->skipped(), 1);
}

TEST(WebDataset, IndexesShardsWithClassNames) {
  TempDir dir;
  WriteColourWebDataset(dir.path(), ColourSetOptions{4, 5, 2, 20, 30, 2}, 3);
  const EncodedDataset data = ListWebDataset(dir.path());
  EXPECT_EQ(data.class_names, (std::vector<std::string>{"class0", "class1", "class2", "class3"}));
  EXPECT_EQ(data.train.size(), 20);
  EXPECT_EQ(data.test.size(), 8);
  EXPECT_EQ(data.train.files.size(), 3u);
  const StreamingImages source(data.train, data.class_names, StreamOptions{"webdataset/train", 16});
  std::vector<uint8_t> pixels(3 * 16 * 16);
  for (int64_t i = 0; i < source.size(); ++i) EXPECT_EQ(source.TryLoad(i, 0, pixels.data()), "") << i;
}

TEST(WebDataset, ExplainsMissingShardsLabelsImagesAndRanges) {
  TempDir dir;
  MakeDirectories(dir / "train");
  MakeDirectories(dir / "test");
  EXPECT_NE(BadInputMessage([&] { ListWebDataset(dir.path()); }).find("no .tar shards"), std::string::npos);

  const std::string jpeg = EncodeJpeg(8, 8, TestPicture(8, 8));
  WriteBytes(dir / "test/0.tar", TarEntry("t/0.jpg", jpeg) + TarEntry("t/0.cls", "0") + TarEnd());
  WriteBytes(dir / "train/0.tar", TarEntry("k/0.jpg", jpeg) + TarEntry("k/0.cls", "0") + TarEntry("k/1.jpg", jpeg) + TarEnd());
  std::string message = BadInputMessage([&] { ListWebDataset(dir.path()); });
  EXPECT_NE(message.find("sample 'k/1' has an image but no .cls label"), std::string::npos) << message;

  WriteBytes(dir / "train/0.tar", TarEntry("k/0.cls", "0") + TarEnd());
  message = BadInputMessage([&] { ListWebDataset(dir.path()); });
  EXPECT_NE(message.find("sample 'k/0' has a .cls label but no .jpg"), std::string::npos) << message;

  WriteBytes(dir / "train/0.tar", TarEntry("k/0.jpg", jpeg) + TarEntry("k/0.cls", "5") + TarEnd());
  WriteBytes(dir / "classes.txt", "a\nb\n");
  message = BadInputMessage([&] { ListWebDataset(dir.path()); });
  EXPECT_NE(message.find("label 5, outside 0..1"), std::string::npos) << message;
  EXPECT_NE(message.find("train/0.tar"), std::string::npos) << message;

  WriteBytes(dir / "train/0.tar", TarEntry("k/0.jpg", jpeg) + TarEntry("k/0.cls", "cat") + TarEnd());
  message = BadInputMessage([&] { ListWebDataset(dir.path()); });
  EXPECT_NE(message.find("'cat', not a label"), std::string::npos) << message;
}

TEST(OpenDataset, AutoStreamsOnlyWhatExceedsTheMemoryBudget) {
  TempDir dir;
  WriteColourImageFolder(dir.path(), ColourSetOptions{2, 3, 2, 20, 30, 4});
  const auto augmentation = std::make_shared<const Augmentation>(AugmentOptions{});
  DatasetOptions options;
  options.image_size = 16;
  options.memory_budget_bytes = 10 * 3 * 16 * 16;  // exactly the 10 images: fits
  EXPECT_EQ(OpenDataset("imagefolder", dir.path(), options, augmentation).data_loading, "memory");
  options.memory_budget_bytes -= 1;
  const OpenedDataset streamed = OpenDataset("imagefolder", dir.path(), options, augmentation);
  EXPECT_EQ(streamed.data_loading, "stream");
  EXPECT_EQ(streamed.memory, nullptr);
  EXPECT_EQ(streamed.train->size(), 6);
  EXPECT_EQ(streamed.test->size(), 4);
  options.data_loading = "memory";
  EXPECT_EQ(OpenDataset("imagefolder", dir.path(), options, augmentation).data_loading, "memory");
  options.data_loading = "stream";
  const std::string message = BadInputMessage([&] { OpenDataset("synthetic", "", options, augmentation); });
  EXPECT_NE(message.find("--data-loading stream"), std::string::npos) << message;
}

}  // namespace
}  // namespace mgpu
