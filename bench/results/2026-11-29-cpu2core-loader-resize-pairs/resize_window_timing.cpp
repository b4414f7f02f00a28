// scratch: the real ResizeWindowInterleaved (old or new image_ops.cpp) over RandomResizedCrop-like windows
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>
#include "data/image_ops.h"
using namespace mgpu;
int main() {
  std::mt19937 rng(3);
  std::vector<std::vector<uint8_t>> images;
  std::vector<ImageSize> sizes;
  for (int i = 0; i < 16; ++i) {
    const int64_t w = 256 + rng() % 245, h = 256 + rng() % 245;
    sizes.push_back(ImageSize{h, w});
    images.emplace_back(w * h * 3 + 1);
    for (auto& b : images.back()) b = rng() & 255;
  }
  std::vector<Window> windows;
  std::vector<int> which;
  for (int i = 0; i < 2000; ++i) {
    const int k = rng() % 16; const ImageSize s = sizes[k];
    const int64_t wh = std::max<int64_t>(32, s.height * (30 + rng() % 71) / 100), ww = std::max<int64_t>(32, s.width * (30 + rng() % 71) / 100);
    windows.push_back(Window{int64_t(rng() % (s.height - wh + 1)), int64_t(rng() % (s.width - ww + 1)), wh, ww});
    which.push_back(k);
  }
  std::vector<uint8_t> out(3 * 224 * 224);
  unsigned long sum = 0;
  double best = 1e9;
  for (int r = 0; r < 7; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 2000; ++i) {
      ResizeWindowInterleaved(images[which[i]].data(), 3, sizes[which[i]], windows[i], out.data(), ImageSize{224, 224}, i & 1);
      sum += out[i % out.size()];
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("%.1f us per resize (best of 7 x 2000), check %lu\n", best / 2000 * 1e6, sum);
}
