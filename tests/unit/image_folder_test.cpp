// Specification of image decoding and of the image-folder data set: PNG and JPEG files in
// class folders load as RGB, resized to the requested side; unreadable images are fatal or
// skipped as asked, and always reported with their path.
#include <gtest/gtest.h>

#include <cstring>

#include <png.h>

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
