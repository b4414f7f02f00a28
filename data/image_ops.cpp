#include "data/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

// The vertical pass is compiled twice on x86-64 (GCC's target_clones), for AVX2 and for the
// baseline, and the dynamic loader picks the one this CPU runs: baseline SSE2 has no 32-bit
// vector multiply, AVX2 has, and nothing requires AVX2 of the machine.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MGPU_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MGPU_VECTOR_CLONES
#endif
// The interleaved-RGB horizontal kernels below, on x86-64 CPUs with SSE4.1, and with AVX2 two
// pixels at a time (both checked at run time).
#if defined(__x86_64__) && defined(__GNUC__)
#define MGPU_RGB_ROW_KERNEL 1
#include <immintrin.h>
#else
#define MGPU_RGB_ROW_KERNEL 0
#endif

namespace mgpu {
namespace {

uint8_t ToPixel(double value) {
  return static_cast<uint8_t>(std::clamp(value, 0.0, 255.0) + 0.5);
}

#if MGPU_RGB_ROW_KERNEL
bool CpuHasSse41() {
  static const bool has = [] {
    __builtin_cpu_init();  // may run before the constructors that would initialize it
    return __builtin_cpu_supports("sse4.1") != 0;
  }();
  return has;
}

bool CpuHasAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
#endif

// Pillow's ImagingResample in fixed point: the filter weights of each output column (and row) are
// computed once, in double, then rounded to integers scaled by 2^kPrecisionBits; each pass sums
// uint8 × int32 products in int32 and rounds back to uint8; the second pass reads the first's
// uint8 result, in the order Pillow 13 picks (ResizeStrided), so the output is Pillow's
// Image.resize of the cropped window to the bit (tests/unit/augment_test.cpp holds PIL's values).
// Pillow's PRECISION_BITS: the weights sum to 2^22, so 255 × 2^22 plus the rounding half fits int32.
constexpr int kPrecisionBits = 32 - 8 - 2;

uint8_t ClipFixed(int32_t sum) {
  const int32_t value = sum >> kPrecisionBits;
  return static_cast<uint8_t>(value < 0 ? 0 : (value > 255 ? 255 : value));
}

// For each output position along one axis, the source taps [first, first + taps) relative to
// the window's start and their fixed-point weights (Pillow's precompute_coeffs with the bilinear
// "triangle" filter, then normalize_coeffs_8bpc). Every position gets the same number of taps,
// the most any needs, zero-weighted where its filter is shorter, so that the inner loops have a
// fixed length (ResampleRgbRow's is a template argument: unrolled, no mispredicted loop exits).
struct Taps {
  std::vector<int32_t> first;
  std::vector<int32_t> weights;  // out × taps
  int64_t taps = 0;
};

Taps ComputeTaps(int64_t length, int64_t out_length) {
  const double scale = static_cast<double>(length) / static_cast<double>(out_length);
  // Shrinking widens the filter so that every source pixel contributes (antialiasing).
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle filter's support is 1
  std::vector<int64_t> lows(static_cast<size_t>(out_length)), highs(lows.size());
  Taps taps;
  for (int64_t i = 0; i < out_length; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    lows[static_cast<size_t>(i)] = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    highs[static_cast<size_t>(i)] = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), length);
    taps.taps = std::max(taps.taps, highs[static_cast<size_t>(i)] - lows[static_cast<size_t>(i)]);
  }
  taps.first.resize(static_cast<size_t>(out_length));
  taps.weights.assign(static_cast<size_t>(out_length * taps.taps), 0);
  std::vector<double> w(static_cast<size_t>(taps.taps));
  for (int64_t i = 0; i < out_length; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = lows[static_cast<size_t>(i)], hi = highs[static_cast<size_t>(i)];
    double total = 0;
    for (int64_t j = lo; j < hi; ++j) {
      const double x = (static_cast<double>(j) - center + 0.5) / filter_scale;
      w[static_cast<size_t>(j - lo)] = std::max(0.0, 1.0 - std::abs(x));
      total += w[static_cast<size_t>(j - lo)];
    }
    // Near the end the window starts earlier, so that all `taps` source pixels exist.
    const int64_t first = std::min(lo, length - taps.taps);
    int32_t* fixed = &taps.weights[static_cast<size_t>(i * taps.taps + lo - first)];
    for (int64_t j = 0; j < hi - lo; ++j) {
      const double k = w[static_cast<size_t>(j)] / total * (1 << kPrecisionBits);
      fixed[j] = static_cast<int32_t>(k < 0 ? std::trunc(k - 0.5) : std::trunc(k + 0.5));
    }
    taps.first[static_cast<size_t>(i)] = static_cast<int32_t>(first);
  }
  return taps;
}

// The same taps for the output positions in reverse order: a horizontal pass with them writes
// each row mirrored, so a resize with a flip costs no pass over its output.
void Mirror(Taps& taps) {
  const auto n = static_cast<int64_t>(taps.first.size());
  std::reverse(taps.first.begin(), taps.first.end());
  for (int64_t i = 0, j = n - 1; i < j; ++i, --j) {
    std::swap_ranges(taps.weights.begin() + i * taps.taps, taps.weights.begin() + (i + 1) * taps.taps,
                     taps.weights.begin() + j * taps.taps);
  }
}

// One source row resampled to `out_width` values per channel, every channel of a pixel in the
// same pass over its taps (Pillow's ss0, ss1, ss2): channel c of source pixel x is at
// row[x·pixel_stride + c·channel_stride]; output channel c goes to out[c·out_plane + x].
template <int kChannels>
void ResampleRow(const uint8_t* row, int64_t pixel_stride, int64_t channel_stride, const Taps& cols,
                 int64_t out_width, uint8_t* out, int64_t out_plane) {
  const int64_t taps = cols.taps;
  for (int64_t x = 0; x < out_width; ++x) {
    const int32_t* w = &cols.weights[static_cast<size_t>(x * taps)];
    const uint8_t* src = row + cols.first[static_cast<size_t>(x)] * pixel_stride;
    int32_t sums[kChannels];
    for (int c = 0; c < kChannels; ++c) sums[c] = 1 << (kPrecisionBits - 1);
    for (int64_t k = 0; k < taps; ++k) {
      for (int c = 0; c < kChannels; ++c) sums[c] += w[k] * src[k * pixel_stride + c * channel_stride];
    }
    for (int c = 0; c < kChannels; ++c) out[c * out_plane + x] = ClipFixed(sums[c]);
  }
}

#if MGPU_RGB_ROW_KERNEL
// ResampleRow for interleaved RGB, a tap's three values in one SSE4.1 vector (Pillow-SIMD's way;
// with it the whole resize takes 2.4x less time than with ResampleRow<3>): each tap reads four bytes, the
// pixel and the byte after it (multiplied into an unused lane), so the caller must make sure
// that byte exists. Written with intrinsics because the byte-to-int32 widening is one
// instruction (pmovzxbd) that GCC's generic vectors turn into a dozen scalar ones.
// Output pixels [begin, out_width).
template <int kTaps>
__attribute__((target("sse4.1"))) void ResampleRgbRow(const uint8_t* row, const Taps& cols, int64_t begin,
                                                      int64_t out_width, uint8_t* out, int64_t out_plane) {
  for (int64_t x = begin; x < out_width; ++x) {
    const int32_t* w = &cols.weights[static_cast<size_t>(x * kTaps)];
    const uint8_t* src = row + cols.first[static_cast<size_t>(x)] * 3;
    __m128i sums = _mm_set1_epi32(1 << (kPrecisionBits - 1));
    for (int k = 0; k < kTaps; ++k) {
      int32_t bytes;
      std::memcpy(&bytes, src + 3 * k, sizeof bytes);
      const __m128i pixel = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes));
      sums = _mm_add_epi32(sums, _mm_mullo_epi32(pixel, _mm_set1_epi32(w[k])));
    }
    // >> kPrecisionBits, then clamped to [0, 255] by the saturating packs (ClipFixed's rule).
    const __m128i shifted = _mm_srai_epi32(sums, kPrecisionBits);
    const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(shifted, shifted), _mm_setzero_si128());
    const auto values = static_cast<uint32_t>(_mm_cvtsi128_si32(packed));
    for (int c = 0; c < 3; ++c) out[c * out_plane + x] = static_cast<uint8_t>(values >> (8 * c));
  }
}

// ResampleRgbRowPairs' weights: output pixels 2p and 2p + 1's weights for tap k as one vector of 8
// lanes, at (p * taps + k) * 8, pixel 2p's four lanes first.
std::vector<int32_t> PairWeights(const Taps& cols, int64_t out_width) {
  std::vector<int32_t> pairs(static_cast<size_t>(out_width / 2 * cols.taps * 8));
  for (int64_t p = 0; p < out_width / 2; ++p) {
    for (int64_t k = 0; k < cols.taps; ++k) {
      for (int64_t lane = 0; lane < 8; ++lane) {
        pairs[static_cast<size_t>((p * cols.taps + k) * 8 + lane)] =
            cols.weights[static_cast<size_t>((2 * p + lane / 4) * cols.taps + k)];
      }
    }
  }
  return pairs;
}

// ResampleRgbRow for two output pixels at a time, one in each 128-bit half of an AVX2 vector:
// the same products and sums, so the same bytes, with half the loop's and the rounding's
// instructions per pixel: in scratch timings on the VM the pass ran 1.4-1.6x faster and a
// crop's whole resize 10-50%, in the loader's profile the pass 13% (against libjpeg's time;
// bench/results/2026-11-29-cpu2core-loader-resize-pairs/). `pairs` is PairWeights(cols,
// out_width); an odd last pixel goes through ResampleRgbRow.
template <int kTaps>
__attribute__((target("avx2"))) void ResampleRgbRowPairs(const uint8_t* row, const Taps& cols, const int32_t* pairs,
                                                         int64_t out_width, uint8_t* out, int64_t out_plane) {
  int64_t x = 0;
  for (; x + 1 < out_width; x += 2) {
    const uint8_t* left = row + cols.first[static_cast<size_t>(x)] * 3;
    const uint8_t* right = row + cols.first[static_cast<size_t>(x + 1)] * 3;
    const int32_t* w = pairs + x / 2 * kTaps * 8;
    __m256i sums = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
    for (int k = 0; k < kTaps; ++k) {
      int32_t left_bytes, right_bytes;
      std::memcpy(&left_bytes, left + 3 * k, sizeof left_bytes);
      std::memcpy(&right_bytes, right + 3 * k, sizeof right_bytes);
      const __m256i pixels = _mm256_cvtepu8_epi32(_mm_insert_epi32(_mm_cvtsi32_si128(left_bytes), right_bytes, 1));
      const __m256i weights = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 8));
      sums = _mm256_add_epi32(sums, _mm256_mullo_epi32(pixels, weights));
    }
    // As ResampleRgbRow, within each half: each half's low four bytes are its pixel's.
    const __m256i shifted = _mm256_srai_epi32(sums, kPrecisionBits);
    const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(shifted, shifted), _mm256_setzero_si256());
    const auto first = static_cast<uint32_t>(_mm256_extract_epi32(packed, 0));
    const auto second = static_cast<uint32_t>(_mm256_extract_epi32(packed, 4));
    for (int c = 0; c < 3; ++c) {
      out[c * out_plane + x] = static_cast<uint8_t>(first >> (8 * c));
      out[c * out_plane + x + 1] = static_cast<uint8_t>(second >> (8 * c));
    }
  }
  ResampleRgbRow<kTaps>(row, cols, x, out_width, out, out_plane);
}

// ResampleRgbRowPairs for the tap counts it is instantiated for; false for others.
bool ResampleRgbRowPairsAnyTaps(const uint8_t* row, const Taps& cols, const int32_t* pairs, int64_t out_width,
                                uint8_t* out, int64_t out_plane) {
  switch (cols.taps) {
    case 2: ResampleRgbRowPairs<2>(row, cols, pairs, out_width, out, out_plane); return true;
    case 3: ResampleRgbRowPairs<3>(row, cols, pairs, out_width, out, out_plane); return true;
    case 4: ResampleRgbRowPairs<4>(row, cols, pairs, out_width, out, out_plane); return true;
    case 5: ResampleRgbRowPairs<5>(row, cols, pairs, out_width, out, out_plane); return true;
    case 6: ResampleRgbRowPairs<6>(row, cols, pairs, out_width, out, out_plane); return true;
    default: return false;
  }
}

// Whether pixels are interleaved RGB, the layout ResampleRgbRow and ResampleRgbRowPairs read.
bool IsInterleavedRgb(int64_t channels, int64_t pixel_stride, int64_t channel_stride) {
  return channels == 3 && pixel_stride == 3 && channel_stride == 1;
}
#endif

// The horizontal pass of one source row: where ResampleRgbRow applies (interleaved RGB, a
// readable byte after the row, SSE4.1, a tap count it is instantiated for), ResampleRgbRowPairs
// if `pairs` (PairWeights(cols, out_width), or nullptr) is given, else ResampleRgbRow; else
// ResampleRow.
void ResampleAnyRow(const uint8_t* row, int64_t channels, int64_t pixel_stride, int64_t channel_stride,
                    bool byte_after_row, const Taps& cols, const int32_t* pairs, int64_t out_width, uint8_t* out,
                    int64_t out_plane) {
#if MGPU_RGB_ROW_KERNEL
  if (IsInterleavedRgb(channels, pixel_stride, channel_stride) && byte_after_row && CpuHasSse41()) {
    if (pairs != nullptr && ResampleRgbRowPairsAnyTaps(row, cols, pairs, out_width, out, out_plane)) return;
    switch (cols.taps) {
      case 2: return ResampleRgbRow<2>(row, cols, 0, out_width, out, out_plane);
      case 3: return ResampleRgbRow<3>(row, cols, 0, out_width, out, out_plane);
      case 4: return ResampleRgbRow<4>(row, cols, 0, out_width, out, out_plane);
      case 5: return ResampleRgbRow<5>(row, cols, 0, out_width, out, out_plane);
      case 6: return ResampleRgbRow<6>(row, cols, 0, out_width, out, out_plane);
      default: break;
    }
  }
#endif
  if (channels == 3) return ResampleRow<3>(row, pixel_stride, channel_stride, cols, out_width, out, out_plane);
  for (int64_t c = 0; c < channels; ++c) {
    ResampleRow<1>(row + c * channel_stride, pixel_stride, 0, cols, out_width, out + c * out_plane, out_plane);
  }
}

// The vertical pass over `line` contiguous values per row (one channel's pixels, or every
// channel of interleaved ones): output row y, of `out_rows`, is the taps' weighted sum of source
// rows rows.first[y]..; rows are `src_stride` and `dst_stride` bytes apart.
MGPU_VECTOR_CLONES void ResampleColumns(const uint8_t* src, int64_t src_stride, int64_t line, const Taps& rows,
                                        int64_t out_rows, uint8_t* dst, int64_t dst_stride) {
  std::vector<int32_t> sums(static_cast<size_t>(line));
  for (int64_t y = 0; y < out_rows; ++y) {
    const int32_t* w = &rows.weights[static_cast<size_t>(y * rows.taps)];
    const uint8_t* first = src + static_cast<int64_t>(rows.first[static_cast<size_t>(y)]) * src_stride;
    std::fill(sums.begin(), sums.end(), 1 << (kPrecisionBits - 1));
    // Tap-major, so that the inner loop runs along a row (vectorizes).
    for (int64_t k = 0; k < rows.taps; ++k) {
      const int32_t weight = w[k];
      const uint8_t* values = first + k * src_stride;
      for (int64_t x = 0; x < line; ++x) sums[static_cast<size_t>(x)] += weight * values[x];
    }
    uint8_t* out = dst + y * dst_stride;
    for (int64_t x = 0; x < line; ++x) out[x] = ClipFixed(sums[static_cast<size_t>(x)]);
  }
}

// The horizontal pass over `height` rows into `out`, (C, height, out_width) with channel planes
// `out_plane` bytes apart; channel c's pixel (y, x) is at in[c·channel_stride + y·row_stride +
// x·pixel_stride], so that one loop serves planar and interleaved images. [in, in_end) is the
// memory that may be read (ResampleRgbRow reads a byte past a row where one exists).
void ResampleRows(const uint8_t* in, const uint8_t* in_end, int64_t channels, int64_t channel_stride,
                  int64_t row_stride, int64_t pixel_stride, int64_t height, int64_t width, const Taps& cols,
                  int64_t out_width, uint8_t* out, int64_t out_plane) {
  std::vector<int32_t> pair_weights;  // computed once for all rows, where AVX2's kernel may run
#if MGPU_RGB_ROW_KERNEL
  if (IsInterleavedRgb(channels, pixel_stride, channel_stride) && CpuHasAvx2()) {
    pair_weights = PairWeights(cols, out_width);
  }
#endif
  const int32_t* pairs = pair_weights.empty() ? nullptr : pair_weights.data();
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = in + y * row_stride;
    const bool byte_after_row = row + width * pixel_stride < in_end;
    ResampleAnyRow(row, channels, pixel_stride, channel_stride, byte_after_row, cols, pairs, out_width,
                   out + y * out_width, out_plane);
  }
}

// Both passes, in Pillow 13's order: the vertical pass first when the height shrinks by more
// than twice as many pixels as the width (less work), else the horizontal one. The order decides
// how the intermediate image is rounded, so it is followed to stay Pillow's to the bit. `flip`
// mirrors the output's rows (the horizontal pass's taps in reverse order).
void ResizeStrided(const uint8_t* in, const uint8_t* in_end, int64_t channels, int64_t channel_stride,
                   int64_t row_stride, int64_t pixel_stride, Window window, uint8_t* out, ImageSize out_size,
                   bool flip) {
  Taps cols = ComputeTaps(window.width, out_size.width);
  if (flip) Mirror(cols);
  const Taps rows = ComputeTaps(window.height, out_size.height);
  const uint8_t* origin = in + window.top * row_stride + window.left * pixel_stride;
  const int64_t out_plane = out_size.height * out_size.width;
  const int64_t height_cut = window.height - out_size.height, width_cut = window.width - out_size.width;
  if (height_cut > 0 && height_cut > 2 * width_cut) {
    if (channel_stride == 1 && pixel_stride == channels) {
      // Interleaved: the vertical pass takes every channel of a row at once.
      const int64_t line = window.width * channels;
      std::vector<uint8_t> vertical(static_cast<size_t>(out_size.height * line + 1));  // + ResampleRgbRow's byte
      ResampleColumns(origin, row_stride, line, rows, out_size.height, vertical.data(), line);
      ResampleRows(vertical.data(), vertical.data() + vertical.size(), channels, 1, line, channels, out_size.height,
                   window.width, cols, out_size.width, out, out_plane);
      return;
    }
    const int64_t plane = out_size.height * window.width;
    std::vector<uint8_t> vertical(static_cast<size_t>(channels * plane));
    for (int64_t c = 0; c < channels; ++c) {
      ResampleColumns(origin + c * channel_stride, row_stride, window.width, rows, out_size.height,
                      &vertical[static_cast<size_t>(c * plane)], window.width);
    }
    ResampleRows(vertical.data(), vertical.data() + vertical.size(), channels, plane, window.width, 1,
                 out_size.height, window.width, cols, out_size.width, out, out_plane);
    return;
  }
  const int64_t plane = window.height * out_size.width;
  std::vector<uint8_t> horizontal(static_cast<size_t>(channels * plane));
  ResampleRows(origin, in_end, channels, channel_stride, row_stride, pixel_stride, window.height, window.width, cols,
               out_size.width, horizontal.data(), plane);
  for (int64_t c = 0; c < channels; ++c) {
    ResampleColumns(&horizontal[static_cast<size_t>(c * plane)], out_size.width, out_size.width, rows,
                    out_size.height, out + c * out_plane, out_size.width);
  }
}

}  // namespace

void ResizeWindow(const uint8_t* in, int64_t channels, ImageSize size, Window window,
                  uint8_t* out, ImageSize out_size, bool flip) {
  ResizeStrided(in, in + channels * size.height * size.width, channels, size.height * size.width, size.width, 1,
                window, out, out_size, flip);
}

void ResizeWindowInterleaved(const uint8_t* in, int64_t channels, ImageSize size, Window window,
                             uint8_t* out, ImageSize out_size, bool flip) {
  ResizeStrided(in, in + channels * size.height * size.width, channels, 1, size.width * channels, channels, window,
                out, out_size, flip);
}

void ResizeBilinear(const uint8_t* in, int64_t channels, ImageSize size, uint8_t* out,
                    ImageSize out_size) {
  ResizeWindow(in, channels, size, Window{0, 0, size.height, size.width}, out, out_size, /*flip=*/false);
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
