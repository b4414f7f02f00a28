// Generated image data for the loader tests: JPEGs encoded in memory, tar archives written
// byte by byte (ustar headers, GNU long names), and small colour-coded data sets in the
// ImageFolder and WebDataset layouts, whose class is easy to learn from the pixels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu::testing {

// JPEG bytes of a width x height image given as (H, W, 3) RGB.
std::string EncodeJpeg(int width, int height, const std::vector<uint8_t>& rgb, int quality = 95);

// The JPEG codings a decoder must agree on (the --decode gpu tests): JpegVariant's fields say
// how EncodeJpegVariant codes the picture.
enum class JpegSampling { k420, k422, k444, k411 };
struct JpegVariant {
  bool progressive = false;
  bool grayscale = false;  // one component, from the picture's green channel
  bool cmyk = false;       // four components (Adobe CMYK), C = 255 - R, M = 255 - G, Y = 255 - B, K = 0
  bool exif = false;       // an APP1 "Exif" segment (orientation 6) before the frame
  JpegSampling sampling = JpegSampling::k420;
  int quality = 95;
};
std::string EncodeJpegVariant(int width, int height, const std::vector<uint8_t>& rgb, const JpegVariant& variant);

// A smooth test picture (gradients, and rings of a 125-pixel period), (H, W, 3): decoders' and
// resizers' geometry shows on it, unlike on flat colour; detail much finer than the output's
// pixels would measure the filters' different antialiasing instead.
std::vector<uint8_t> TestPicture(int width, int height);

// One tar entry: its 512-byte header (ustar; a GNU 'L' entry first when `name` has more than
// 100 bytes) and its data padded to 512 bytes. An archive is members + TarEnd().
std::string TarEntry(const std::string& name, const std::string& data);
std::string TarEnd();

// The class of a colour-coded sample: class c is a flat colour of hue c / classes with noise,
// sides drawn from [min_side, max_side]; deterministic in (seed, index).
struct ColourSetOptions {
  int classes = 3;
  int train_per_class = 20;
  int test_per_class = 6;
  int min_side = 40;
  int max_side = 90;
  uint64_t seed = 1;
};
// root/train/class<c>/<i>.jpg and root/test/class<c>/<i>.jpg.
void WriteColourImageFolder(const std::string& root, const ColourSetOptions& options);
// root/train/shard-<k>.tar and root/test/shard-<k>.tar (`shards` each), samples
// <split>/<i>.jpg + <split>/<i>.cls, and root/classes.txt.
void WriteColourWebDataset(const std::string& root, const ColourSetOptions& options, int shards = 2);

}  // namespace mgpu::testing
