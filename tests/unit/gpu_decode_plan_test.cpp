// Specification of --decode's CPU side (data/jpeg_header.h, data/decode_mode.h,
// StreamingImages::PlanCrop): JPEG headers read without decoding, which codings go to nvJPEG and
// which fall back to the CPU path, crop plans identical to the CPU path's random draws, and the
// refusals of --decode gpu (exit code 2) where it cannot run. The device side is in
// tests/gpu/gpu_decode_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "common/files.h"
#include "common/status.h"
#include "data/decode_mode.h"
#include "data/image_codec.h"
#include "data/image_ops.h"
#include "data/jpeg_header.h"
#include "data/nvjpeg_library.h"
#include "data/sample_source.h"
#include "data/streaming_images.h"
#include "tests/support/image_files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

JpegHeader HeaderOf(const std::string& bytes) {
  return ReadJpegHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

JpegVariant Progressive() { JpegVariant v; v.progressive = true; return v; }
JpegVariant Grayscale() { JpegVariant v; v.grayscale = true; return v; }
JpegVariant Cmyk() { JpegVariant v; v.cmyk = true; return v; }
JpegVariant Exif() { JpegVariant v; v.exif = true; return v; }
JpegVariant Sampled(JpegSampling sampling) { JpegVariant v; v.sampling = sampling; return v; }

std::string Encode(int width, int height, const JpegVariant& variant) {
  return EncodeJpegVariant(width, height, TestPicture(width, height), variant);
}

TEST(JpegHeader, ReadsSizeComponentsAndSamplingOfABaselineOddSizedImage) {
  const JpegHeader header = HeaderOf(Encode(37, 23, JpegVariant{}));
  ASSERT_TRUE(header.is_jpeg) << header.error;
  EXPECT_EQ(header.size, (ImageSize{23, 37}));
  EXPECT_EQ(header.components, 3);
  EXPECT_FALSE(header.progressive);
  EXPECT_FALSE(header.cmyk);
  EXPECT_EQ(header.max_h_sampling, 2) << "4:2:0: luma sampled 2 x 2";
  EXPECT_EQ(header.max_v_sampling, 2);
}

TEST(JpegHeader, TellsProgressiveGrayscaleCmykAnd444Apart) {
  EXPECT_TRUE(HeaderOf(Encode(40, 30, Progressive())).progressive);
  EXPECT_EQ(HeaderOf(Encode(40, 30, Grayscale())).components, 1);
  EXPECT_TRUE(HeaderOf(Encode(40, 30, Cmyk())).cmyk);
  const JpegHeader full_chroma = HeaderOf(Encode(40, 30, Sampled(JpegSampling::k444)));
  EXPECT_EQ(full_chroma.max_h_sampling, 1);
  EXPECT_EQ(full_chroma.max_v_sampling, 1);
  const JpegHeader exif = HeaderOf(Encode(41, 29, Exif()));
  EXPECT_TRUE(exif.is_jpeg) << "an APP1 Exif segment before the frame: " << exif.error;
  EXPECT_EQ(exif.size, (ImageSize{29, 41}));
}

TEST(JpegHeader, NonJpegBytesAreNotJpegAndATruncatedHeaderSaysWhy) {
  const std::string png_signature = "\x89PNG\r\n\x1a\n rest of a png";
  const JpegHeader png = HeaderOf(png_signature);
  EXPECT_FALSE(png.is_jpeg);
  EXPECT_EQ(png.error, "") << "not a JPEG is no error: the CPU path reads PNGs";
  const JpegHeader truncated = HeaderOf(Encode(40, 30, JpegVariant{}).substr(0, 40));
  EXPECT_FALSE(truncated.is_jpeg);
  EXPECT_NE(truncated.error, "") << "libjpeg's message is kept for the CPU path to report";
}

TEST(RouteForGpu, BaselineGrayAndExifGoToNvjpegTheRestToTheCpuPath) {
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(37, 23, JpegVariant{}))), GpuDecodeRoute::kGpu);
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, Sampled(JpegSampling::k444)))), GpuDecodeRoute::kGpu);
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, Sampled(JpegSampling::k422)))), GpuDecodeRoute::kGpu);
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, Grayscale()))), GpuDecodeRoute::kGpu);
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, Exif()))), GpuDecodeRoute::kGpu);

  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, Progressive()))), GpuDecodeRoute::kProgressive);
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, Cmyk()))), GpuDecodeRoute::kCmyk);
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, Sampled(JpegSampling::k411)))),
            GpuDecodeRoute::kUnusualSampling);
  EXPECT_EQ(RouteForGpu(HeaderOf("\x89PNG\r\n\x1a\n")), GpuDecodeRoute::kNotJpeg);
  EXPECT_EQ(RouteForGpu(HeaderOf(Encode(40, 30, JpegVariant{}).substr(0, 40))), GpuDecodeRoute::kBadHeader);
}

TEST(RouteForGpu, ImagesAboveTheDeviceBufferBoundGoToTheCpuPath) {
  JpegHeader header = HeaderOf(Encode(40, 30, JpegVariant{}));
  header.size = ImageSize{4096, 4096};  // 16 Mpixel: the bound itself
  EXPECT_EQ(RouteForGpu(header), GpuDecodeRoute::kGpu);
  header.size = ImageSize{4096, 4097};
  EXPECT_EQ(RouteForGpu(header), GpuDecodeRoute::kTooLarge);
  EXPECT_STREQ(RouteName(GpuDecodeRoute::kTooLarge), "too_large");
}

// The CPU path decodes at full DCT scale when the output side exceeds every crop, so its sample
// is then exactly the plan's window resized and flipped: the plan is the CPU path's own draw.
TEST(PlanCrop, IsTheCpuPathsRandomResizedCropAndFlipForEverySampleAndEpoch) {
  TempDir dir;
  constexpr int kWidth = 40, kHeight = 30, kSide = 48;
  const std::string jpeg = Encode(kWidth, kHeight, Sampled(JpegSampling::k444));
  EncodedSamples samples;
  for (int i = 0; i < 12; ++i) {
    samples.files.push_back(dir / std::to_string(i) + ".jpg");
    WriteBytes(samples.files.back(), jpeg);
    samples.entries.push_back(EncodedSamples::Entry{0, -1, i});
    samples.labels.push_back(i % 3);
  }
  const StreamingImages source(samples, {"a", "b", "c"},
                               StreamOptions{"plan", kSide, StreamTransform::kRandomResizedCropFlip, false, 5});
  const DecodedImage full = DecodeImageBytes(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), "full");
  std::vector<uint8_t> chw(static_cast<size_t>(3 * kWidth * kHeight));
  for (int64_t p = 0; p < kWidth * kHeight; ++p) {
    for (int64_t c = 0; c < 3; ++c) chw[static_cast<size_t>(c * kWidth * kHeight + p)] = full.rgb[static_cast<size_t>(p * 3 + c)];
  }
  int flips = 0;
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (int64_t index = 0; index < source.size(); ++index) {
      const CropPlan plan = source.PlanCrop(index, epoch, ImageSize{kHeight, kWidth});
      std::vector<uint8_t> expected(3 * kSide * kSide), loaded(3 * kSide * kSide);
      ResizeWindow(chw.data(), 3, ImageSize{kHeight, kWidth}, plan.window, expected.data(), ImageSize{kSide, kSide},
                   /*flip=*/false);
      if (plan.flip) FlipHorizontal(expected.data(), 3, ImageSize{kSide, kSide});
      flips += plan.flip;
      ASSERT_EQ(source.TryLoad(index, epoch, loaded.data()), "");
      ASSERT_EQ(loaded, expected) << "sample " << index << " epoch " << epoch << ": window (" << plan.window.top << ", "
                                  << plan.window.left << ", " << plan.window.height << ", " << plan.window.width
                                  << ") flip " << plan.flip;
    }
  }
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, 36) << "the coin shows both sides over 36 draws";
}

TEST(PlanCrop, CentreCropAndStretchAreTheCpuPathsWindowsWithoutFlip) {
  EncodedSamples samples;
  samples.files = {"unused.jpg"};
  samples.entries = {EncodedSamples::Entry{}};
  samples.labels = {0};
  const StreamingImages centre(samples, {"a"}, StreamOptions{"c", 224, StreamTransform::kResizeCenterCrop});
  const CropPlan plan = centre.PlanCrop(0, 0, ImageSize{300, 400});
  EXPECT_FALSE(plan.flip);
  const Window expected = CenterCropWindow(ImageSize{300, 400}, 224);
  EXPECT_EQ(plan.window.top, expected.top);
  EXPECT_EQ(plan.window.width, expected.width);
  const StreamingImages stretch(samples, {"a"}, StreamOptions{"s", 224, StreamTransform::kStretch});
  const CropPlan whole = stretch.PlanCrop(0, 0, ImageSize{300, 400});
  EXPECT_EQ(whole.window.height, 300);
  EXPECT_EQ(whole.window.width, 400);
}

class ChooseDecoderTest : public ::testing::Test {
 protected:
  ChooseDecoderTest() {
    WriteBytes(dir_ / "a.jpg", Encode(40, 30, JpegVariant{}));
    EncodedSamples samples;
    samples.files = {dir_ / "a.jpg"};
    samples.entries = {EncodedSamples::Entry{}};
    samples.labels = {0};
    streaming_ = std::make_unique<StreamingImages>(samples, std::vector<std::string>{"a"}, StreamOptions{"s", 24});
  }
  TempDir dir_;
  std::unique_ptr<StreamingImages> streaming_;
};

TEST_F(ChooseDecoderTest, CpuIsAlwaysCpu) {
  EXPECT_FALSE(ChooseDecoder(DecodeMode::kCpu, DecodeCircumstances{true, false, streaming_.get()}).gpu);
}

TEST_F(ChooseDecoderTest, GpuWithoutACudaDeviceIsBadInputNamingTheDevice) {
  try {
    ChooseDecoder(DecodeMode::kGpu, DecodeCircumstances{false, false, streaming_.get()});
    FAIL() << "--decode gpu on the CPU was accepted";
  } catch (const BadInputError& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("--decode gpu: the training device is not a CUDA device"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--decode cpu"), std::string::npos) << e.what();
  }
}

TEST_F(ChooseDecoderTest, GpuWithDataInMemoryOrModeDpIsBadInput) {
  ImageDataset dataset;
  dataset.images = torch::zeros({1, 3, 4, 4}, torch::kUInt8);
  dataset.labels = torch::zeros({1}, torch::kInt64);
  dataset.class_names = {"a"};
  dataset.mean = {0, 0, 0};
  dataset.stddev = {1, 1, 1};
  const InMemorySamples memory(dataset, nullptr);
  EXPECT_THROW(ChooseDecoder(DecodeMode::kGpu, DecodeCircumstances{true, false, &memory}), BadInputError);
  EXPECT_THROW(ChooseDecoder(DecodeMode::kGpu, DecodeCircumstances{true, true, streaming_.get()}), BadInputError);
}

TEST_F(ChooseDecoderTest, AutoFallsBackToCpuAndSaysWhy) {
  const DecodeChoice choice = ChooseDecoder(DecodeMode::kAuto, DecodeCircumstances{false, false, streaming_.get()});
  EXPECT_FALSE(choice.gpu);
  EXPECT_NE(choice.why.find("cpu (--decode auto: the training device is not a CUDA device"), std::string::npos)
      << choice.why;
}

TEST(ParseDecodeMode, TakesCpuGpuAutoAndRefusesOthers) {
  EXPECT_EQ(ParseDecodeMode("cpu"), DecodeMode::kCpu);
  EXPECT_EQ(ParseDecodeMode("gpu"), DecodeMode::kGpu);
  EXPECT_EQ(ParseDecodeMode("auto"), DecodeMode::kAuto);
  EXPECT_THROW(ParseDecodeMode("nvjpeg"), BadInputError);
}

// In a child process (libnvjpeg is opened once per process): a library that is not there is
// named, with how to install it, whether this build has nvJPEG's header or not.
TEST(MayDecodeOnGpu, OnlyGpuOrAutoWithOneCudaDeviceOutsideModeDp) {
  EXPECT_TRUE(MayDecodeOnGpu(DecodeMode::kGpu, /*cuda_device=*/true, /*data_parallel=*/false));
  EXPECT_TRUE(MayDecodeOnGpu(DecodeMode::kAuto, true, false));
  EXPECT_FALSE(MayDecodeOnGpu(DecodeMode::kCpu, true, false));
  EXPECT_FALSE(MayDecodeOnGpu(DecodeMode::kGpu, /*cuda_device=*/false, false));
  EXPECT_FALSE(MayDecodeOnGpu(DecodeMode::kAuto, true, /*data_parallel=*/true));
}

TEST(WhyNoNvjpeg, NamesTheMissingLibraryAndHowToInstallIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("MGPU_NVJPEG_LIBRARY", "/nonexistent/libnvjpeg.so.13", 1);
        const std::string why = WhyNoNvjpeg();
        std::fprintf(stderr, "%s\n", why.c_str());
        std::exit(why.empty() ? 0 : 2);
      },
      ::testing::ExitedWithCode(2), "nvidia-nvjpeg==13.0");
}

}  // namespace
}  // namespace mgpu
