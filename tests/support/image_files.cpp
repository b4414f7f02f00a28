#include "tests/support/image_files.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include <fmt/format.h>

#include "common/files.h"
#include "data/counter_rng.h"
#include "tests/support/test_support.h"

namespace mgpu::testing {
namespace {

// Octal, zero-padded to `length - 1` digits and a NUL, as ustar writes numbers.
void PutOctal(char* field, int length, uint64_t value) {
  std::snprintf(field, static_cast<size_t>(length), "%0*llo", length - 1, static_cast<unsigned long long>(value));
}

std::string Header(const std::string& name, uint64_t size, char type) {
  char header[512];
  std::memset(header, 0, sizeof(header));
  std::memcpy(header, name.data(), std::min<size_t>(name.size(), 100));
  PutOctal(header + 100, 8, 0644);
  PutOctal(header + 108, 8, 0);
  PutOctal(header + 116, 8, 0);
  PutOctal(header + 124, 12, size);
  PutOctal(header + 136, 12, 0);
  header[156] = type;
  std::memcpy(header + 257, "ustar\0" "00", 8);
  std::memset(header + 148, ' ', 8);
  unsigned sum = 0;
  for (const char c : header) sum += static_cast<unsigned char>(c);
  std::snprintf(header + 148, 8, "%06o", sum);  // six digits, NUL, and the space already there
  return std::string(header, sizeof(header));
}

std::string Padded(std::string data) {
  data.resize((data.size() + 511) / 512 * 512, '\0');
  return data;
}

// A flat colour for class `c` of `classes`, with noise of +-20, in a side drawn per sample.
std::string ColourSample(const ColourSetOptions& options, int c, uint64_t key, int* label) {
  CounterRng rng(options.seed, static_cast<uint64_t>(c), key);
  const int width = static_cast<int>(rng.UniformInt(options.min_side, options.max_side));
  const int height = static_cast<int>(rng.UniformInt(options.min_side, options.max_side));
  const double hue = 2.0 * M_PI * c / options.classes;
  const double base[3] = {128 + 110 * std::cos(hue), 128 + 110 * std::cos(hue - 2.094), 128 + 110 * std::cos(hue + 2.094)};
  std::vector<uint8_t> rgb;
  for (int i = 0; i < width * height; ++i) {
    for (double b : base) rgb.push_back(static_cast<uint8_t>(std::clamp(b + rng.Uniform(-20, 20), 0.0, 255.0)));
  }
  *label = c;
  return EncodeJpeg(width, height, rgb, 90);
}

}  // namespace

std::string EncodeJpeg(int width, int height, const std::vector<uint8_t>& rgb, int quality) {
  JpegVariant baseline;  // RGB, 4:2:0, as jpeg_set_defaults samples it
  baseline.quality = quality;
  return EncodeJpegVariant(width, height, rgb, baseline);
}

std::string EncodeJpegVariant(int width, int height, const std::vector<uint8_t>& rgb, const JpegVariant& variant) {
  // A minimal big-endian TIFF inside "Exif\0\0": one IFD entry, Orientation (0x0112) = 6.
  static const uint8_t kExif[] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
                                  0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0};
  jpeg_compress_struct info;
  jpeg_error_mgr errors;
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = static_cast<JDIMENSION>(width);
  info.image_height = static_cast<JDIMENSION>(height);
  const int components = variant.grayscale ? 1 : variant.cmyk ? 4 : 3;
  info.input_components = components;
  info.in_color_space = variant.grayscale ? JCS_GRAYSCALE : variant.cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&info);
  jpeg_set_quality(&info, variant.quality, TRUE);
  if (components == 3) {
    const int h = variant.sampling == JpegSampling::k444 ? 1 : variant.sampling == JpegSampling::k411 ? 4 : 2;
    const int v = variant.sampling == JpegSampling::k420 ? 2 : 1;
    info.comp_info[0].h_samp_factor = h;
    info.comp_info[0].v_samp_factor = v;
  }
  if (variant.progressive) jpeg_simple_progression(&info);
  jpeg_start_compress(&info, TRUE);
  if (variant.exif) jpeg_write_marker(&info, JPEG_APP0 + 1, kExif, sizeof(kExif));
  std::vector<uint8_t> row(static_cast<size_t>(width * components));
  while (info.next_scanline < info.image_height) {
    const uint8_t* in = rgb.data() + static_cast<size_t>(info.next_scanline) * width * 3;
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < components; ++c) {
        const uint8_t value = variant.grayscale ? in[x * 3 + 1] : c < 3 ? in[x * 3 + c] : 0;
        row[static_cast<size_t>(x * components + c)] = variant.cmyk && c < 3 ? 255 - value : value;
      }
    }
    JSAMPROW pointer = row.data();
    jpeg_write_scanlines(&info, &pointer, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  std::string bytes(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return bytes;
}

std::vector<uint8_t> TestPicture(int width, int height) {
  std::vector<uint8_t> rgb;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const double r = std::hypot(x - width / 2.0, y - height / 2.0);
      rgb.push_back(static_cast<uint8_t>(255.0 * x / width));
      rgb.push_back(static_cast<uint8_t>(255.0 * y / height));
      rgb.push_back(static_cast<uint8_t>(128 + 127 * std::sin(r / 20.0)));
    }
  }
  return rgb;
}

std::string TarEntry(const std::string& name, const std::string& data) {
  std::string out;
  if (name.size() > 100) out += Header("././@LongLink", name.size() + 1, 'L') + Padded(name + '\0');
  return out + Header(name, data.size(), '0') + Padded(data);
}

std::string TarEnd() { return std::string(1024, '\0'); }

void WriteColourImageFolder(const std::string& root, const ColourSetOptions& options) {
  for (const auto& [split, count] : {std::pair{"train", options.train_per_class}, std::pair{"test", options.test_per_class}}) {
    for (int c = 0; c < options.classes; ++c) {
      const std::string dir = fmt::format("{}/{}/class{}", root, split, c);
      MakeDirectories(dir);
      for (int i = 0; i < count; ++i) {
        int label = 0;
        const uint64_t key = std::string(split) == "train" ? static_cast<uint64_t>(i) : 1000000u + static_cast<uint64_t>(i);
        WriteBytes(fmt::format("{}/{:04d}.jpg", dir, i), ColourSample(options, c, key, &label));
      }
    }
  }
}

void WriteColourWebDataset(const std::string& root, const ColourSetOptions& options, int shards) {
  std::string classes;
  for (int c = 0; c < options.classes; ++c) classes += fmt::format("class{}\n", c);
  MakeDirectories(root);
  WriteBytes(root + "/classes.txt", classes);
  for (const auto& [split, count] : {std::pair{"train", options.train_per_class}, std::pair{"test", options.test_per_class}}) {
    MakeDirectories(fmt::format("{}/{}", root, split));
    std::vector<std::string> tars(static_cast<size_t>(shards));
    int sample = 0;
    for (int i = 0; i < count; ++i) {
      for (int c = 0; c < options.classes; ++c, ++sample) {
        int label = 0;
        const uint64_t key = std::string(split) == "train" ? static_cast<uint64_t>(i) : 1000000u + static_cast<uint64_t>(i);
        const std::string jpeg = ColourSample(options, c, key, &label);
        std::string& tar = tars[static_cast<size_t>(sample % shards)];
        tar += TarEntry(fmt::format("{}/{:06d}.jpg", split, sample), jpeg);
        tar += TarEntry(fmt::format("{}/{:06d}.cls", split, sample), std::to_string(label));
      }
    }
    for (int k = 0; k < shards; ++k) {
      WriteBytes(fmt::format("{}/{}/shard-{:03d}.tar", root, split, k), tars[static_cast<size_t>(k)] + TarEnd());
    }
  }
}

}  // namespace mgpu::testing
