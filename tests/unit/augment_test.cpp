// Specification of the pixel operations and augmentation policies: zero-strength transforms
// are exact identities, flips and crops behave geometrically, random windows stay in bounds,
// and a sample's augmentation depends only on (seed, epoch, index).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <string>

#include <fmt/format.h>

#include "common/status.h"
#include "data/augment.h"
#include "data/batch_loader.h"
#include "data/image_ops.h"

namespace mgpu {
namespace {

// A (C, H, W) image of distinct-ish pixel values.
std::vector<uint8_t> Pattern(int64_t channels, ImageSize size) {
  std::vector<uint8_t> pixels(static_cast<size_t>(channels * size.height * size.width));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 37 + i / 7) % 256);
  return pixels;
}

// The same image interleaved, (H, W, C), as the decoders write it.
std::vector<uint8_t> Interleaved(const std::vector<uint8_t>& chw, int64_t channels, ImageSize size) {
  std::vector<uint8_t> hwc(chw.size());
  for (int64_t p = 0; p < size.height * size.width; ++p) {
    for (int64_t c = 0; c < channels; ++c) {
      hwc[static_cast<size_t>(p * channels + c)] = chw[static_cast<size_t>(c * size.height * size.width + p)];
    }
  }
  return hwc;
}

// Resizes of a 37 x 41 image that cover both pass orders, up- and downscaling, and windows that end
// at the image's last pixel (where the RGB kernel may not read the byte after a row).
constexpr ImageSize kResizedImage{37, 41};
constexpr Window kResizeWindows[] = {{0, 0, 37, 41}, {5, 7, 32, 34}, {30, 1, 7, 9}, {2, 3, 11, 13}};
constexpr ImageSize kResizeOutputs[] = {{8, 8}, {37, 41}, {5, 30}, {30, 5}, {64, 50}, {1, 1}, {3, 17}};

uint8_t At(const std::vector<uint8_t>& pixels, ImageSize size, int64_t c, int64_t y, int64_t x) {
  return pixels[static_cast<size_t>((c * size.height + y) * size.width + x)];
}

TEST(ImageOps, AffineWithZeroParametersReturnsTheInputExactly) {
  const ImageSize size{13, 17};
  const std::vector<uint8_t> in = Pattern(3, size);
  for (Interpolation interpolation : {Interpolation::kNearest, Interpolation::kBilinear}) {
    std::vector<uint8_t> out(in.size());
    AffineWarp(in.data(), 3, size, AffineParams{0, 0, 0, 1}, interpolation, out.data());
    EXPECT_EQ(out, in);
  }
}

TEST(ImageOps, AffineShiftsRotatesAndFillsWithZero) {
  const ImageSize size{4, 4};
  const std::vector<uint8_t> in = Pattern(1, size);
  std::vector<uint8_t> out(in.size());
  AffineWarp(in.data(), 1, size, AffineParams{0, 1, 0, 1}, Interpolation::kNearest, out.data());
  for (int64_t y = 0; y < 4; ++y) {
    EXPECT_EQ(At(out, size, 0, y, 0), 0);  // shifted right by one: column 0 is fill
    for (int64_t x = 1; x < 4; ++x) EXPECT_EQ(At(out, size, 0, y, x), At(in, size, 0, y, x - 1));
  }
  // 90 degrees clockwise, as displayed (torchvision's F.affine): the top row becomes the right
  // column.
  AffineWarp(in.data(), 1, size, AffineParams{90, 0, 0, 1}, Interpolation::kNearest, out.data());
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(At(out, size, 0, i, 3), At(in, size, 0, 0, i));
}

TEST(ImageOps, FlippingTwiceIsTheIdentityAndOnceMirrorsRows) {
  const ImageSize size{5, 6};
  const std::vector<uint8_t> in = Pattern(3, size);
  std::vector<uint8_t> pixels = in;
  FlipHorizontal(pixels.data(), 3, size);
  EXPECT_NE(pixels, in);
  EXPECT_EQ(At(pixels, size, 2, 4, 0), At(in, size, 2, 4, 5));
  FlipHorizontal(pixels.data(), 3, size);
  EXPECT_EQ(pixels, in);
}

TEST(ImageOps, CropCopiesTheWindowAndZeroFillsOutsideTheImage) {
  const ImageSize size{6, 6};
  const std::vector<uint8_t> in = Pattern(2, size);
  std::vector<uint8_t> out(2 * 6 * 6);
  Crop(in.data(), 2, size, Window{-2, 3, 6, 6}, out.data());
  for (int64_t y = 0; y < 6; ++y) {
    for (int64_t x = 0; x < 6; ++x) {
      const bool inside = y >= 2 && x < 3;
      EXPECT_EQ(At(out, size, 1, y, x), inside ? At(in, size, 1, y - 2, x + 3) : 0) << y << "," << x;
    }
  }
}

TEST(ImageOps, ResizeToTheSameSizeCopiesAndSolidColoursStaySolid) {
  const ImageSize size{9, 11};
  const std::vector<uint8_t> in = Pattern(3, size);
  std::vector<uint8_t> same(in.size());
  ResizeBilinear(in.data(), 3, size, same.data(), size);
  EXPECT_EQ(same, in);
  const std::vector<uint8_t> solid(3 * 9 * 11, 77);
  for (const ImageSize target : {ImageSize{4, 5}, ImageSize{30, 20}}) {
    std::vector<uint8_t> out(static_cast<size_t>(3 * target.height * target.width));
    ResizeBilinear(solid.data(), 3, size, out.data(), target);
    EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 77));
  }
}

TEST(ImageOps, ResizeMatchesPilsAntialiasedBilinear) {
  // Reference values: PIL 13's Image.resize(..., BILINEAR) of the row [10, 30, 100, 200]
  // (torch's interpolate(antialias=True) gives 31.43, 132.86 and 47.5, 82.5 before rounding).
  const std::vector<uint8_t> in = {10, 30, 100, 200};
  std::vector<uint8_t> half(2), twice(8);
  ResizeBilinear(in.data(), 1, ImageSize{1, 4}, half.data(), ImageSize{1, 2});
  ResizeBilinear(in.data(), 1, ImageSize{1, 4}, twice.data(), ImageSize{1, 8});
  EXPECT_EQ(half, (std::vector<uint8_t>{31, 133}));
  EXPECT_EQ(twice, (std::vector<uint8_t>{10, 15, 25, 48, 83, 125, 175, 200}));
}

// Pillow rounds the first pass to uint8 before the second and, since Pillow 13, runs the vertical
// pass first when the height shrinks by more than twice as many pixels as the width. Reference
// values: Pillow 13.0's Image.resize(..., BILINEAR) of these "L" images; a float resize without
// the intermediate rounding gives 103 and 160, 161 at the marked places.
TEST(ImageOps, ResizeMatchesPillowToTheBitInEitherPassOrder) {
  const std::vector<uint8_t> three = {33, 115, 66, 20, 153, 7, 229, 169, 82};  // 3 x 3, horizontal pass first
  std::vector<uint8_t> tall(9);
  ResizeBilinear(three.data(), 1, ImageSize{3, 3}, tall.data(), ImageSize{9, 1});
  EXPECT_EQ(tall, (std::vector<uint8_t>{78, 78, 76, 75, 73, /*103*/ 102, 132, 161, 161}));

  const std::vector<uint8_t> six = {248, 207, 155, 244, 183, 111, 71,  144, 71,  48, 128, 75,  // 6 x 6, vertical first
                                    158, 50,  37,  169, 241, 51,  181, 222, 161, 104, 244, 226,
                                    133, 31,  7,   47,  204, 0,   252, 170, 124, 166, 32,  97};
  std::vector<uint8_t> flat(5);
  ResizeBilinear(six.data(), 1, ImageSize{6, 6}, flat.data(), ImageSize{1, 5});
  EXPECT_EQ(flat, (std::vector<uint8_t>{/*160*/ 161, 117, 107, /*161*/ 162, 114}));
}

// The streaming loader resizes the decoder's interleaved (H, W, 3) pixels directly; it must give
// what the channel-major resize gives, in both pass orders, up- and downscaling, and for windows
// that end at the image's last pixel (where the RGB kernel may not read the byte after a row).
TEST(ImageOps, InterleavedResizeEqualsChannelMajorResize) {
  const ImageSize size = kResizedImage;
  const std::vector<uint8_t> chw = Pattern(3, size);
  const std::vector<uint8_t> hwc = Interleaved(chw, 3, size);
  for (const Window& window : kResizeWindows) {
    for (const ImageSize out : kResizeOutputs) {
      std::vector<uint8_t> planar(static_cast<size_t>(3 * out.height * out.width)), interleaved(planar.size());
      ResizeWindow(chw.data(), 3, size, window, planar.data(), out, /*flip=*/false);
      ResizeWindowInterleaved(hwc.data(), 3, size, window, interleaved.data(), out, /*flip=*/false);
      EXPECT_EQ(interleaved, planar) << "window at " << window.top << "," << window.left << " of " << window.height
                                     << " x " << window.width << " to " << out.height << " x " << out.width;
    }
  }
}

// rrc-flip's flip is folded into the resize (its horizontal pass writes the rows mirrored): it must
// give what a resize and then FlipHorizontal give, in both layouts and pass orders, for one and
// three channels, odd and even widths.
TEST(ImageOps, AFlippedResizeIsTheResizeMirrored) {
  const ImageSize size = kResizedImage;
  for (const int64_t channels : {int64_t{1}, int64_t{3}}) {
    const std::vector<uint8_t> chw = Pattern(channels, size);
    const std::vector<uint8_t> hwc = Interleaved(chw, channels, size);
    for (const Window& window : kResizeWindows) {
      for (const ImageSize out : kResizeOutputs) {
        std::vector<uint8_t> expected(static_cast<size_t>(channels * out.height * out.width));
        std::vector<uint8_t> planar(expected.size()), interleaved(expected.size());
        ResizeWindow(chw.data(), channels, size, window, expected.data(), out, /*flip=*/false);
        FlipHorizontal(expected.data(), channels, out);
        ResizeWindow(chw.data(), channels, size, window, planar.data(), out, /*flip=*/true);
        ResizeWindowInterleaved(hwc.data(), channels, size, window, interleaved.data(), out, /*flip=*/true);
        const std::string where = fmt::format("{} channel(s), window at {},{} of {} x {} to {} x {}", channels,
                                              window.top, window.left, window.height, window.width, out.height,
                                              out.width);
        EXPECT_EQ(planar, expected) << where;
        EXPECT_EQ(interleaved, expected) << where;
      }
    }
  }
}

TEST(RandomWindows, PaddedCropsStayWithinThePadding) {
  const ImageSize size{32, 32};
  std::set<int64_t> tops;
  for (int64_t index = 0; index < 2000; ++index) {
    CounterRng rng(1, 0, static_cast<uint64_t>(index));
    const Window w = DrawPaddedCrop(rng, size, 4);
    EXPECT_GE(w.top, -4);
    EXPECT_LE(w.top, 4);
    EXPECT_GE(w.left, -4);
    EXPECT_LE(w.left, 4);
    EXPECT_EQ(w.height, 32);
    EXPECT_EQ(w.width, 32);
    tops.insert(w.top);
  }
  EXPECT_EQ(tops.size(), 9u);  // every offset in [-4, 4] occurs
}

TEST(RandomWindows, ResizedCropsStayInsideTheImage) {
  for (const ImageSize size : {ImageSize{32, 32}, ImageSize{150, 100}, ImageSize{20, 200}}) {
    for (int64_t index = 0; index < 2000; ++index) {
      CounterRng rng(2, 1, static_cast<uint64_t>(index));
      const Window w = DrawResizedCrop(rng, size);
      EXPECT_GE(w.top, 0);
      EXPECT_GE(w.left, 0);
      EXPECT_GE(w.height, 1);
      EXPECT_GE(w.width, 1);
      EXPECT_LE(w.top + w.height, size.height);
      EXPECT_LE(w.left + w.width, size.width);
    }
  }
}

TEST(RandomWindows, AffineDrawsRespectTheirRanges) {
  for (int64_t index = 0; index < 1000; ++index) {
    CounterRng rng(3, 0, static_cast<uint64_t>(index));
    const AffineParams p = DrawAffine(rng, ImageSize{28, 40}, 10, 0.1, 0.9, 1.1);
    EXPECT_LE(std::abs(p.angle_degrees), 10);
    EXPECT_LE(std::abs(p.translate_x), 4);
    EXPECT_LE(std::abs(p.translate_y), 3);  // round(2.8)
    EXPECT_EQ(p.translate_x, std::round(p.translate_x));
    EXPECT_GE(p.scale, 0.9);
    EXPECT_LE(p.scale, 1.1);
  }
}

AugmentOptions Policy(const std::string& kind, int64_t resize = 0) {
  AugmentOptions options;
  options.kind = kind;
  options.resize = resize;
  options.seed = 11;
  return options;
}

TEST(Augmentation, OutputSizeFollowsResize) {
  EXPECT_EQ(Augmentation(Policy("none")).OutputSize({32, 32}), (ImageSize{32, 32}));
  EXPECT_EQ(Augmentation(Policy("crop-flip")).OutputSize({32, 32}), (ImageSize{32, 32}));
  EXPECT_EQ(Augmentation(Policy("affine")).OutputSize({28, 28}), (ImageSize{28, 28}));
  EXPECT_EQ(Augmentation(Policy("resize", 227)).OutputSize({32, 32}), (ImageSize{227, 227}));
  EXPECT_EQ(Augmentation(Policy("rrc-flip", 224)).OutputSize({64, 48}), (ImageSize{224, 224}));
  EXPECT_EQ(Augmentation(Policy("rrc-flip")).OutputSize({64, 48}), (ImageSize{64, 48}));
  EXPECT_EQ(Augmentation(Policy("rrc-flip", 224)).ForEvaluation()->OutputSize({64, 48}), (ImageSize{224, 224}));
  EXPECT_TRUE(Augmentation(Policy("crop-flip")).ForEvaluation()->identity());
}

TEST(Augmentation, AffinePolicyAtZeroStrengthIsTheIdentity) {
  AugmentOptions options = Policy("affine");
  options.affine_degrees = 0;
  options.affine_translate = 0;
  options.affine_scale_min = options.affine_scale_max = 1;
  options.affine_interpolation = "bilinear";
  const ImageSize size{28, 28};
  const std::vector<uint8_t> in = Pattern(1, size);
  std::vector<uint8_t> out(in.size());
  Augmentation(options).Apply(in.data(), 1, size, 3, 12345, out.data());
  EXPECT_EQ(out, in);
}

TEST(Augmentation, SameSeedEpochAndIndexGiveTheSameImage) {
  const ImageSize size{32, 32};
  const std::vector<uint8_t> in = Pattern(3, size);
  for (const char* kind : {"affine", "crop-flip", "rrc-flip"}) {
    const Augmentation augmentation(Policy(kind));
    auto apply = [&](int64_t epoch, int64_t index) {
      std::vector<uint8_t> out(in.size());
      augmentation.Apply(in.data(), 3, size, epoch, index, out.data());
      return out;
    };
    EXPECT_EQ(apply(2, 5), apply(2, 5)) << kind;
    // Another epoch or sample draws other parameters (these particular ones differ).
    EXPECT_NE(apply(2, 5), apply(3, 5)) << kind;
    EXPECT_NE(apply(2, 5), apply(2, 6)) << kind;
  }
}

TEST(Augmentation, BadParametersNameTheirFlag) {
  auto message = [](AugmentOptions options) {
    try {
      Augmentation check(options);
    } catch (const BadInputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(Policy("resize", 0)).find("needs --resize N"), std::string::npos);
  EXPECT_NE(message(Policy("mixup")).find("--augment 'mixup'"), std::string::npos);
  AugmentOptions translate = Policy("affine");
  translate.affine_translate = 1.5;
  EXPECT_NE(message(translate).find("--affine-translate"), std::string::npos);
  AugmentOptions scale = Policy("affine");
  scale.affine_scale_min = 1.2;
  EXPECT_NE(message(scale).find("--affine-scale"), std::string::npos);
}

// A data set of 3x32x32 images, image i filled with a pattern shifted by i.
ImageDataset PatternDataset(int64_t n) {
  ImageDataset ds;
  ds.name = "pattern";
  ds.images = torch::empty({n, 3, 32, 32}, torch::kUInt8);
  const std::vector<uint8_t> base = Pattern(3, {32, 32});
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* dst = ds.images[i].data_ptr<uint8_t>();
    for (size_t p = 0; p < base.size(); ++p) dst[p] = static_cast<uint8_t>(base[p] + i);
  }
  ds.labels = torch::arange(n, torch::kInt64) % 10;
  ds.class_names = std::vector<std::string>(10, "c");
  ds.mean = {0.5f, 0.5f, 0.5f};
  ds.stddev = {0.25f, 0.25f, 0.25f};
  return ds;
}

std::vector<torch::Tensor> EpochImages(BatchLoader& loader, const std::vector<int64_t>& order, int64_t epoch) {
  loader.StartEpoch(order, epoch);
  std::vector<torch::Tensor> images;
  while (auto batch = loader.Next()) images.push_back(batch->images);
  return images;
}

TEST(AugmentedLoader, BatchesAreTheSameWithZeroAndFourWorkers) {
  const ImageDataset ds = PatternDataset(96);
  std::vector<int64_t> order(96);
  std::iota(order.rbegin(), order.rend(), 0);
  for (const char* kind : {"affine", "crop-flip", "rrc-flip"}) {
    auto augmentation = std::make_shared<const Augmentation>(Policy(kind));
    BatchLoader serial(ds, LoaderOptions{16, 0, 2, false, augmentation});
    BatchLoader threaded(ds, LoaderOptions{16, 4, 2, false, augmentation});
    for (int64_t epoch : {0, 1}) {
      const auto expected = EpochImages(serial, order, epoch);
      const auto got = EpochImages(threaded, order, epoch);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t b = 0; b < got.size(); ++b) {
        EXPECT_TRUE(torch::equal(got[b], expected[b])) << kind << " epoch " << epoch << " batch " << b;
      }
    }
    // Epochs draw differently.
    EXPECT_FALSE(torch::equal(EpochImages(serial, order, 0)[0], EpochImages(serial, order, 1)[0])) << kind;
  }
}

TEST(AugmentedLoader, ASampleLooksTheSameWhereverItIsInTheEpoch) {
  const ImageDataset ds = PatternDataset(8);
  auto augmentation = std::make_shared<const Augmentation>(Policy("crop-flip"));
  BatchLoader loader(ds, LoaderOptions{4, 0, 2, false, augmentation});
  const auto forward = EpochImages(loader, {0, 1, 2, 3, 4, 5, 6, 7}, 4);
  const auto backward = EpochImages(loader, {7, 6, 5, 4, 3, 2, 1, 0}, 4);
  EXPECT_TRUE(torch::equal(forward[0][1], backward[1][2]));  // sample 1
}

TEST(AugmentedLoader, ResizeChangesTheBatchShape) {
  const ImageDataset ds = PatternDataset(3);
  BatchLoader loader(ds, LoaderOptions{2, 0, 2, false, std::make_shared<const Augmentation>(Policy("resize", 40))});
  const auto images = EpochImages(loader, {0, 1, 2}, 0);
  EXPECT_EQ(images[0].sizes(), (std::vector<int64_t>{2, 3, 40, 40}));
  EXPECT_EQ(images[1].sizes(), (std::vector<int64_t>{1, 3, 40, 40}));
}

}  // namespace
}  // namespace mgpu
