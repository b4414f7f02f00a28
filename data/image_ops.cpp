#include "data/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace mgpu {
namespace {

uint8_t ToPixel(double value) {
  return static_cast<uint8_t>(std::clamp(value, 0.0, 255.0) + 0.5);
}

// For each output position along one axis, the source taps [first, first + count) and their
// normalized weights (PIL's precompute_coeffs with the bilinear "triangle" filter).
struct Taps {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<double> weights;  // out × stride
  int64_t stride = 0;
};

Taps ComputeTaps(int64_t begin, int64_t length, int64_t out_length) {
  const double scale = static_cast<double>(length) / static_cast<double>(out_length);
  // Shrinking widens the filter so that every source pixel contributes (antialiasing).
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle filter's support is 1
  Taps taps;
  taps.stride = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  taps.first.resize(static_cast<size_t>(out_length));
  taps.count.resize(static_cast<size_t>(out_length));
  taps.weights.assign(static_cast<size_t>(out_length * taps.stride), 0.0);
  for (int64_t i = 0; i < out_length; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;  // relative to `begin`
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), length);
    double total = 0;
    double* w = &taps.weights[static_cast<size_t>(i * taps.stride)];
    for (int64_t j = lo; j < hi; ++j) {
      const double x = (static_cast<double>(j) - center + 0.5) / filter_scale;
      w[j - lo] = std::max(0.0, 1.0 - std::abs(x));
      total += w[j - lo];
    }
    for (int64_t j = lo; j < hi; ++j) w[j - lo] /= total;
    taps.first[static_cast<size_t>(i)] = begin + lo;
    taps.count[static_cast<size_t>(i)] = hi - lo;
  }
  return taps;
}

}  // namespace

void ResizeWindow(const uint8_t* in, int64_t channels, ImageSize size, Window window,
                  uint8_t* out, ImageSize out_size) {
  const Taps cols = ComputeTaps(window.left, window.width, out_size.width);
  const Taps rows = ComputeTaps(window.top, window.height, out_size.height);
  // Horizontal pass over the window's rows: (window.height, out.width) per channel.
  std::vector<double> horizontal(static_cast<size_t>(window.height * out_size.width));
  for (int64_t c = 0; c < channels; ++c) {
    const uint8_t* plane = in + c * size.height * size.width;
    for (int64_t y = 0; y < window.height; ++y) {
      const uint8_t* row = plane + (window.top + y) * size.width;
      for (int64_t x = 0; x < out_size.width; ++x) {
        const double* w = &cols.weights[static_cast<size_t>(x * cols.stride)];
        const uint8_t* src = row + cols.first[static_cast<size_t>(x)];
        double sum = 0;
        for (int64_t k = 0; k < cols.count[static_cast<size_t>(x)]; ++k) sum += w[k] * src[k];
        horizontal[static_cast<size_t>(y * out_size.width + x)] = sum;
      }
    }
    uint8_t* dst = out + c * out_size.height * out_size.width;
    for (int64_t y = 0; y < out_size.height; ++y) {
      const double* w = &rows.weights[static_cast<size_t>(y * rows.stride)];
      const double* src =
          &horizontal[static_cast<size_t>((rows.first[static_cast<size_t>(y)] - window.top) * out_size.width)];
      for (int64_t x = 0; x < out_size.width; ++x) {
        double sum = 0;
        for (int64_t k = 0; k < rows.count[static_cast<size_t>(y)]; ++k) {
          sum += w[k] * src[k * out_size.width + x];
        }
        dst[y * out_size.width + x] = ToPixel(sum);
      }
    }
  }
}

void ResizeBilinear(const uint8_t* in, int64_t channels, ImageSize size, uint8_t* out,
                    ImageSize out_size) {
  ResizeWindow(in, channels, size, Window{0, 0, size.height, size.width}, out, out_size);
}

void Crop(const uint8_t* in, int64_t channels, ImageSize size, Window window, uint8_t* out) {
  std::memset(out, 0, static_cast<size_t>(channels * window.height * window.width));
  // The part of the window inside the image, in window coordinates.
  const int64_t x0 = std::max<int64_t>(0, -window.left);
  const int64_t x1 = std::min(window.width, size.width - window.left);
  if (x1 <= x0) return;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t y = 0; y < window.height; ++y) {
      const int64_t sy = window.top + y;
      if (sy < 0 || sy >= size.height) continue;
      std::memcpy(out + (c * window.height + y) * window.width + x0,
                  in + (c * size.height + sy) * size.width + window.left + x0,
                  static_cast<size_t>(x1 - x0));
    }
  }
}

void FlipHorizontal(uint8_t* pixels, int64_t channels, ImageSize size) {
  for (int64_t row = 0; row < channels * size.height; ++row) {
    std::reverse(pixels + row * size.width, pixels + (row + 1) * size.width);
  }
}

void AffineWarp(const uint8_t* in, int64_t channels, ImageSize size, const AffineParams& params,
                Interpolation interpolation, uint8_t* out) {
  // torchvision's _get_inverse_affine_matrix without shear: output → input is
  // C · (R S)^-1 · C^-1 · T^-1, with C the move to the image centre.
  const double cx = 0.5 * static_cast<double>(size.width);
  const double cy = 0.5 * static_cast<double>(size.height);
  const double angle = params.angle_degrees * M_PI / 180.0;
  double m[6] = {std::cos(angle) / params.scale,  std::sin(angle) / params.scale, 0.0,
                 -std::sin(angle) / params.scale, std::cos(angle) / params.scale, 0.0};
  m[2] = m[0] * (-cx - params.translate_x) + m[1] * (-cy - params.translate_y) + cx;
  m[5] = m[3] * (-cx - params.translate_x) + m[4] * (-cy - params.translate_y) + cy;

  const int64_t plane = size.height * size.width;
  auto pixel = [&](const uint8_t* src, int64_t x, int64_t y) -> double {
    return x < 0 || y < 0 || x >= size.width || y >= size.height ? 0.0 : src[y * size.width + x];
  };
  for (int64_t y = 0; y < size.height; ++y) {
    for (int64_t x = 0; x < size.width; ++x) {
      // The output pixel's centre, mapped into the source.
      const double px = static_cast<double>(x) + 0.5, py = static_cast<double>(y) + 0.5;
      const double qx = m[0] * px + m[1] * py + m[2];
      const double qy = m[3] * px + m[4] * py + m[5];
      for (int64_t c = 0; c < channels; ++c) {
        const uint8_t* src = in + c * plane;
        double value;
        if (interpolation == Interpolation::kNearest) {
          value = pixel(src, static_cast<int64_t>(std::floor(qx)), static_cast<int64_t>(std::floor(qy)));
        } else {
          const double sx = qx - 0.5, sy = qy - 0.5;  // in pixel-index coordinates
          const double fx = std::floor(sx), fy = std::floor(sy);
          const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
          const double ax = sx - fx, ay = sy - fy;
          value = (1 - ay) * ((1 - ax) * pixel(src, x0, y0) + ax * pixel(src, x0 + 1, y0)) +
                  ay * ((1 - ax) * pixel(src, x0, y0 + 1) + ax * pixel(src, x0 + 1, y0 + 1));
        }
        out[c * plane + y * size.width + x] = ToPixel(value);
      }
    }
  }
}

}  // namespace mgpu
