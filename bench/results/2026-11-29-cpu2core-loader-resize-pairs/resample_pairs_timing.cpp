// scratch: SSE4.1 one-pixel vs AVX2 two-pixel horizontal resample, bit-compare and time
#include <immintrin.h>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
constexpr int kPrecisionBits = 22;
struct Taps { std::vector<int32_t> first, weights; int64_t taps = 0; };
Taps ComputeTaps(int64_t length, int64_t out_length) {
  const double scale = double(length) / double(out_length);
  const double filter_scale = std::max(scale, 1.0), support = filter_scale;
  std::vector<int64_t> lows(out_length), highs(out_length);
  Taps taps;
  for (int64_t i = 0; i < out_length; ++i) {
    const double center = (i + 0.5) * scale;
    lows[i] = std::max<int64_t>(int64_t(center - support + 0.5), 0);
    highs[i] = std::min<int64_t>(int64_t(center + support + 0.5), length);
    taps.taps = std::max(taps.taps, highs[i] - lows[i]);
  }
  taps.first.resize(out_length); taps.weights.assign(out_length * taps.taps, 0);
  std::vector<double> w(taps.taps);
  for (int64_t i = 0; i < out_length; ++i) {
    const double center = (i + 0.5) * scale; const int64_t lo = lows[i], hi = highs[i]; double total = 0;
    for (int64_t j = lo; j < hi; ++j) { const double x = (j - center + 0.5) / filter_scale; w[j-lo] = std::max(0.0, 1.0 - std::abs(x)); total += w[j-lo]; }
    const int64_t first = std::min(lo, length - taps.taps);
    int32_t* fixed = &taps.weights[i * taps.taps + lo - first];
    for (int64_t j = 0; j < hi - lo; ++j) { const double k = w[j] / total * (1 << kPrecisionBits); fixed[j] = int32_t(k < 0 ? std::trunc(k - 0.5) : std::trunc(k + 0.5)); }
    taps.first[i] = int32_t(first);
  }
  return taps;
}
template <int kTaps>
__attribute__((target("sse4.1"),noinline)) void Sse(const uint8_t* row, const Taps& cols, int64_t out_width, uint8_t* out, int64_t out_plane) {
  for (int64_t x = 0; x < out_width; ++x) {
    const int32_t* w = &cols.weights[x * kTaps];
    const uint8_t* src = row + cols.first[x] * 3;
    __m128i sums = _mm_set1_epi32(1 << (kPrecisionBits - 1));
    for (int k = 0; k < kTaps; ++k) {
      int32_t bytes; std::memcpy(&bytes, src + 3 * k, 4);
      sums = _mm_add_epi32(sums, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes)), _mm_set1_epi32(w[k])));
    }
    const __m128i shifted = _mm_srai_epi32(sums, kPrecisionBits);
    const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(shifted, shifted), _mm_setzero_si128());
    const auto v = uint32_t(_mm_cvtsi128_si32(packed));
    for (int c = 0; c < 3; ++c) out[c * out_plane + x] = uint8_t(v >> (8 * c));
  }
}
// pair weights: for pair p, tap k: 8 lanes (w[2p][k] x4, w[2p+1][k] x4)
std::vector<int32_t> PairWeights(const Taps& cols, int64_t out_width) {
  std::vector<int32_t> pw((out_width / 2) * cols.taps * 8);
  for (int64_t p = 0; p < out_width / 2; ++p) for (int64_t k = 0; k < cols.taps; ++k) for (int l = 0; l < 8; ++l)
    pw[(p * cols.taps + k) * 8 + l] = cols.weights[(2 * p + l / 4) * cols.taps + k];
  return pw;
}
template <int kTaps>
__attribute__((target("avx2"),noinline)) void Avx(const uint8_t* row, const Taps& cols, const int32_t* pw, int64_t out_width, uint8_t* out, int64_t out_plane) {
  int64_t x = 0;
  for (; x + 1 < out_width; x += 2) {
    const uint8_t* s0 = row + cols.first[x] * 3;
    const uint8_t* s1 = row + cols.first[x + 1] * 3;
    const int32_t* w = pw + (x / 2) * kTaps * 8;
    __m256i sums = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
    for (int k = 0; k < kTaps; ++k) {
      int32_t b0, b1; std::memcpy(&b0, s0 + 3 * k, 4); std::memcpy(&b1, s1 + 3 * k, 4);
      const __m256i pix = _mm256_cvtepu8_epi32(_mm_insert_epi32(_mm_cvtsi32_si128(b0), b1, 1));
      sums = _mm256_add_epi32(sums, _mm256_mullo_epi32(pix, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k * 8))));
    }
    const __m256i shifted = _mm256_srai_epi32(sums, kPrecisionBits);
    const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(shifted, shifted), _mm256_setzero_si256());
    const auto v0 = uint32_t(_mm256_extract_epi32(packed, 0)), v1 = uint32_t(_mm256_extract_epi32(packed, 4));
    for (int c = 0; c < 3; ++c) { out[c * out_plane + x] = uint8_t(v0 >> (8 * c)); out[c * out_plane + x + 1] = uint8_t(v1 >> (8 * c)); }
  }
  if (x < out_width) { // last odd pixel: scalar-ish via SSE path on one pixel
    const int32_t* w = &cols.weights[x * kTaps]; const uint8_t* src = row + cols.first[x] * 3;
    __m128i sums = _mm_set1_epi32(1 << (kPrecisionBits - 1));
    for (int k = 0; k < kTaps; ++k) { int32_t bytes; std::memcpy(&bytes, src + 3 * k, 4);
      sums = _mm_add_epi32(sums, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes)), _mm_set1_epi32(w[k]))); }
    const __m128i sh = _mm_srai_epi32(sums, kPrecisionBits);
    const auto v = uint32_t(_mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(sh, sh), _mm_setzero_si128())));
    for (int c = 0; c < 3; ++c) out[c * out_plane + x] = uint8_t(v >> (8 * c));
  }
}
int main() {
  std::mt19937 rng(1);
  const int W = 500, H = 375;
  std::vector<uint8_t> img(W * H * 3 + 1); for (auto& b : img) b = rng() & 255;
  for (int win : {260, 330, 420, 480}) {
    Taps cols = ComputeTaps(win, 224);
    auto pw = PairWeights(cols, 224);
    std::vector<uint8_t> a(3 * 224 * H), b(3 * 224 * H);
    auto run = [&](bool avx) {
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < 200; ++it)
        for (int y = 0; y < H; ++y) {
          const uint8_t* row = img.data() + y * W * 3;
          uint8_t* o = (avx ? b.data() : a.data()) + y * 224;
          switch (cols.taps) {
            case 3: avx ? Avx<3>(row, cols, pw.data(), 224, o, 224 * H) : Sse<3>(row, cols, 224, o, 224 * H); break;
            case 4: avx ? Avx<4>(row, cols, pw.data(), 224, o, 224 * H) : Sse<4>(row, cols, 224, o, 224 * H); break;
            case 5: avx ? Avx<5>(row, cols, pw.data(), 224, o, 224 * H) : Sse<5>(row, cols, 224, o, 224 * H); break;
            case 6: avx ? Avx<6>(row, cols, pw.data(), 224, o, 224 * H) : Sse<6>(row, cols, 224, o, 224 * H); break;
            default: std::printf("taps %ld\n", cols.taps); return 0.0;
          }
        }
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    double ts = 1e9, ta = 1e9;
    for (int r = 0; r < 5; ++r) { ts = std::min(ts, run(false)); ta = std::min(ta, run(true)); }
    std::printf("window %d taps %ld: sse %.3f s avx %.3f s (%.2fx) same=%d\n", win, cols.taps, ts, ta, ts / ta, a == b);
  }
}
