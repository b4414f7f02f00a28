// Specification of image decoding and of the image-folder data set: PNG and JPEG files in
// class folders load as RGB, resized to the requested side; unreadable images are fatal or
// skipped as asked, and always reported with their path.
#include <gtest/gtest.h>

#include <cstring>

#include <png.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/files.h"
#include "common/status.h"
#include "data/image_codec.h"
#include "data/image_folder.h"
#include "tests/support/image_files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

// A width x height RGB image whose every pixel is (r, g, b), as (H, W, 3) bytes.
std::vector<uint8_t> Solid(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  std::vector<uint8_t> rgb;
  for (int i = 0; i < width * height; ++i) rgb.insert(rgb.end(), {r, g, b});
  return rgb;
}

void WritePng(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  ASSERT_NE(png_image_write_to_file(&image, path.c_str(), 0, rgb.data(), 0, nullptr), 0) << image.message;
}

void WriteJpeg(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb) {
  WriteBytes(path, EncodeJpeg(width, height, rgb));
}

// train/{cat,dog}/ with a red PNG and a blue JPEG cat, a green PNG dog; test/ with one of each.
void WriteTinyFolder(const std::string& root) {
  for (const char* dir : {"train/cat", "train/dog", "test/cat", "test/dog"}) {
    MakeDirectories(root + "/" + dir);
  }
  WritePng(root + "/train/cat/a.png", 20, 10, Solid(20, 10, 250, 0, 0));
  WriteJpeg(root + "/train/cat/b.JPG", 16, 16, Solid(16, 16, 0, 0, 250));
  WritePng(root + "/train/dog/c.png", 8, 8, Solid(8, 8, 0, 250, 0));
  WriteBytes(root + "/train/dog/notes.txt", "not an image, ignored");
  WritePng(root + "/test/cat/d.png", 8, 8, Solid(8, 8, 250, 0, 0));
  WriteJpeg(root + "/test/dog/e.jpeg", 8, 8, Solid(8, 8, 0, 250, 0));
}

TEST(ImageCodec, DecodesPngAndJpegToRgb) {
  TempDir dir;
  std::vector<uint8_t> gradient;
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 5; ++x) gradient.insert(gradient.end(), {uint8_t(x * 50), uint8_t(y * 100), 7});
  }
  WritePng(dir / "g.png", 5, 3, gradient);
  const DecodedImage png = DecodeImageFile(dir / "g.png");
  EXPECT_EQ(png.width, 5);
  EXPECT_EQ(png.height, 3);
  EXPECT_EQ(png.rgb, gradient);  // PNG is lossless

  WriteJpeg(dir / "s.jpg", 8, 8, Solid(8, 8, 200, 100, 50));
  const DecodedImage jpeg = DecodeImageFile(dir / "s.jpg");
  ASSERT_EQ(jpeg.rgb.size(), 8u * 8u * 3u);
  EXPECT_NEAR(jpeg.rgb[0], 200, 3);
  EXPECT_NEAR(jpeg.rgb[1], 100, 3);
  EXPECT_NEAR(jpeg.rgb[2], 50, 3);
}

TEST(ImageCodec, TruncatedAndForeignFilesAreErrorsNamingThePath) {
  TempDir dir;
  WriteJpeg(dir / "full.jpg", 32, 32, Solid(32, 32, 1, 2, 3));
  const std::string jpeg = ReadText(dir / "full.jpg");
  WriteBytes(dir / "cut.jpg", jpeg.substr(0, jpeg.size() / 2));
  WritePng(dir / "full.png", 32, 32, Solid(32, 32, 1, 2, 3));
  const std::string png = ReadText(dir / "full.png");
  WriteBytes(dir / "cut.png", png.substr(0, png.size() / 2));
  WriteBytes(dir / "text.png", "hello");
  for (const char* name : {"cut.jpg", "cut.png", "text.png"}) {
    const std::string message = BadInputMessage([&] { DecodeImageFile(dir / name); });
    EXPECT_NE(message.find(dir / name), std::string::npos) << message;
  }
  EXPECT_NE(BadInputMessage([&] { DecodeImageFile(dir / "text.png"); }).find("not a JPEG or PNG"),
            std::string::npos);
}

TEST(ImageFolder, LoadsClassFoldersResizedToTheRequestedSide) {
  TempDir dir;
  WriteTinyFolder(dir.path());
  const TrainTestSplit data = LoadImageFolder(dir.path(), ImageFolderOptions{12, "fail", 2});
  EXPECT_EQ(data.train.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(data.train.images.sizes(), (std::vector<int64_t>{3, 3, 12, 12}));
  EXPECT_EQ(data.test.images.sizes(), (std::vector<int64_t>{2, 3, 12, 12}));
  EXPECT_TRUE(torch::equal(data.train.labels, torch::tensor({0, 0, 1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(data.test.labels, torch::tensor({0, 1}, torch::kInt64)));
  // Sorted by class, then file name: a.png (red), b.JPG (blue), c.png (green); a solid colour
  // survives resizing exactly.
  EXPECT_EQ(data.train.images[0][0][5][5].item<int>(), 250);
  EXPECT_EQ(data.train.images[0][1][5][5].item<int>(), 0);
  EXPECT_NEAR(data.train.images[1][2][5][5].item<int>(), 250, 3);
  EXPECT_EQ(data.train.images[2][1][11][11].item<int>(), 250);
  EXPECT_FLOAT_EQ(data.train.mean[0], 0.485f);
  EXPECT_FLOAT_EQ(data.train.stddev[2], 0.225f);
  EXPECT_TRUE(data.warnings.empty());
}

TEST(ImageFolder, CorruptImageIsFatalByDefaultNamingItsPath) {
  TempDir dir;
  WriteTinyFolder(dir.path());
  WriteBytes(dir / "train/dog/broken.png", "\x89PNG\r\n\x1a\n but then nothing");
  const std::string message = BadInputMessage([&] { LoadImageFolder(dir.path(), ImageFolderOptions{12, "fail", 2}); });
  EXPECT_NE(message.find("1 of 4 images in " + dir / "train" + " cannot be read"), std::string::npos) << message;
  EXPECT_NE(message.find(dir / "train/dog/broken.png"), std::string::npos) << message;
  EXPECT_NE(message.find("--on-bad-image skip"), std::string::npos) << message;
}

TEST(ImageFolder, CorruptImageIsSkippedAndReportedWhenAsked) {
  TempDir dir;
  WriteTinyFolder(dir.path());
  WriteBytes(dir / "train/cat/broken.jpg", std::string("\xff\xd8\xff\xe0", 4) + "garbage");
  const TrainTestSplit data = LoadImageFolder(dir.path(), ImageFolderOptions{12, "skip", 2});
  EXPECT_EQ(data.train.size(), 3);
  EXPECT_TRUE(torch::equal(data.train.labels, torch::tensor({0, 0, 1}, torch::kInt64)));
  EXPECT_EQ(data.train.images[2][1][0][0].item<int>(), 250);  // the dog kept its pixels
  ASSERT_EQ(data.warnings.size(), 2u);
  EXPECT_NE(data.warnings[0].find(dir / "train/cat/broken.jpg"), std::string::npos) << data.warnings[0];
  EXPECT_NE(data.warnings[1].find("skipped 1 of 4 images"), std::string::npos) << data.warnings[1];
}

// `jpeg` with the frame size in its SOF0 header changed to width x height.
std::string WithJpegFrameSize(std::string jpeg, int width, int height) {
  const size_t sof = jpeg.find("\xFF\xC0");
  EXPECT_NE(sof, std::string::npos);
  jpeg[sof + 5] = static_cast<char>(height >> 8);
  jpeg[sof + 6] = static_cast<char>(height & 0xFF);
  jpeg[sof + 7] = static_cast<char>(width >> 8);
  jpeg[sof + 8] = static_cast<char>(width & 0xFF);
  return jpeg;
}

// A PNG whose header declares width x height RGB pixels, with one row of data.
std::string PngDeclaring(uint32_t width, uint32_t height) {
  auto be32 = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  auto chunk = [&](const std::string& type, const std::string& data) {
    const std::string typed = type + data;
    const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(typed.data()), static_cast<uInt>(typed.size()));
    return be32(static_cast<uint32_t>(data.size())) + typed + be32(static_cast<uint32_t>(crc));
  };
  std::string row(1 + 3 * 16, '\0');
  std::string packed(compressBound(row.size()), '\0');
  uLongf packed_size = packed.size();
  compress(reinterpret_cast<Bytef*>(packed.data()), &packed_size, reinterpret_cast<const Bytef*>(row.data()), row.size());
  packed.resize(packed_size);
  return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", be32(width) + be32(height) + std::string("\x08\x02\0\0\0", 5)) +
         chunk("IDAT", packed) + chunk("IEND", "");
}

TEST(ImageCodec, DecompressionBombsAreRefusedBeforeTheirPixelsAreAllocated) {
  // 20000 x 20000 is 400 million pixels (1.2 GB decoded) from a few hundred bytes; Pillow's limit
  // is 2 x 89,478,485 pixels.
  const std::string jpeg = WithJpegFrameSize(EncodeJpeg(8, 8, Solid(8, 8, 1, 2, 3)), 20000, 20000);
  const std::string png = PngDeclaring(20000, 20000);
  const long long rss_before = PeakRssBytes();
  using NamedBytes = std::pair<std::string, std::string>;
  for (const NamedBytes& bomb : {NamedBytes{"bomb.jpg", jpeg}, NamedBytes{"bomb.png", png}}) {
    const std::string message = BadInputMessage([&] {
      DecodeImageBytes(reinterpret_cast<const uint8_t*>(bomb.second.data()), bomb.second.size(), bomb.first);
    });
    EXPECT_NE(message.find(bomb.first + ": cannot decode the image: its header declares"), std::string::npos) << message;
    EXPECT_NE(message.find("20000x20000 = 400000000 pixels, more than the 178956970"), std::string::npos) << message;
  }
  EXPECT_LT(PeakRssBytes() - rss_before, 256LL << 20) << "the pixels were allocated before the check";
}

TEST(ImageFolder, AFifoOrABrokenLinkNamedLikeAnImageIsABadImageNotLeftOutUnseen) {
  TempDir dir;
  WriteTinyFolder(dir.path());
  ASSERT_EQ(mkfifo((dir / "train/cat/fifo.jpg").c_str(), 0600), 0);  // opening it would block
  ASSERT_EQ(symlink("absent.png", (dir / "train/cat/dangling.png").c_str()), 0);
  ASSERT_EQ(symlink("loop-b.jpg", (dir / "train/dog/loop-a.jpg").c_str()), 0);
  ASSERT_EQ(symlink("loop-a.jpg", (dir / "train/dog/loop-b.jpg").c_str()), 0);
  const std::string message = BadInputMessage([&] { LoadImageFolder(dir.path(), ImageFolderOptions{12, "fail", 2}); });
  EXPECT_NE(message.find("4 of 7 images in " + dir / "train" + " cannot be read"), std::string::npos) << message;
  EXPECT_NE(message.find(dir / "train/cat/fifo.jpg: a FIFO"), std::string::npos) << message;
  EXPECT_NE(message.find(dir / "train/cat/dangling.png: a dangling symbolic link to 'absent.png'"), std::string::npos)
      << message;
  EXPECT_NE(message.find(dir / "train/dog/loop-a.jpg: a symbolic link loop"), std::string::npos) << message;

  const TrainTestSplit data = LoadImageFolder(dir.path(), ImageFolderOptions{12, "skip", 2});
  EXPECT_EQ(data.train.size(), 3);
  EXPECT_EQ(data.train.skipped, 4);
  EXPECT_EQ(data.test.skipped, 0);
  EXPECT_NE(data.warnings.back().find("skipped 4 of 7 images"), std::string::npos) << data.warnings.back();
}

TEST(ImageFolder, LayoutErrorsSayWhatIsExpected) {
  TempDir dir;
  MakeDirectories(dir / "train");
  MakeDirectories(dir / "test");
  EXPECT_NE(BadInputMessage([&] { LoadImageFolder(dir.path(), ImageFolderOptions{}); })
                .find(dir / "train: no class sub-folders"),
            std::string::npos);
  MakeDirectories(dir / "train/cat");
  RemovePath(dir / "test");
  EXPECT_NE(BadInputMessage([&] { LoadImageFolder(dir.path(), ImageFolderOptions{}); })
                .find(dir / "test: folder not found"),
            std::string::npos);
  MakeDirectories(dir / "test");
  WritePng(dir / "train/cat/a.png", 4, 4, Solid(4, 4, 1, 1, 1));
  EXPECT_NE(BadInputMessage([&] { LoadImageFolder(dir.path(), ImageFolderOptions{}); })
                .find(dir / "test: no class sub-folders"),
            std::string::npos);
  RemovePath(dir / "train/cat/a.png");
  MakeDirectories(dir / "test/cat");
  EXPECT_NE(BadInputMessage([&] { LoadImageFolder(dir.path(), ImageFolderOptions{}); })
                .find(dir / "train/cat: no .jpg, .jpeg or .png images"),
            std::string::npos);
  WritePng(dir / "train/cat/a.png", 4, 4, Solid(4, 4, 1, 1, 1));
  WritePng(dir / "test/cat/a.png", 4, 4, Solid(4, 4, 1, 1, 1));
  MakeDirectories(dir / "test/cow");
  EXPECT_NE(BadInputMessage([&] { LoadImageFolder(dir.path(), ImageFolderOptions{}); })
                .find(dir / "test/cow: class folder not found in the training split"),
            std::string::npos);
}

}  // namespace
}  // namespace mgpu
