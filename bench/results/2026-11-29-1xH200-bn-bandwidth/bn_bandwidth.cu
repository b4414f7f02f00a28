// Times mgpu's fused batch-norm kernels (models/kernels/batch_norm_kernels.cu) over a model's batch norms
// at batch 256, channels-last bf16 (or float32), as the graphed step calls them: per batch norm the forward
// (statistics, finalize, apply) and the backward (gradient sums, finalize, apply), with the L2 flushed before
// each launch (the step's inputs come from a convolution, not from the cache), median of five. Prints the
// sums over the model (µs a step, as the profile's rows), the bytes moved and their rate, and a hash of every
// output, so that variants that must give the same bits can be told apart from ones that do not.
//
//   nvcc -std=c++17 -O3 -arch=sm_90 -I VARIANT_ROOT -I REPO bn_bandwidth.cu VARIANT_ROOT/models/kernels/batch_norm_kernels.cu
//   ./a.out resnet50|resnet18 [float]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "models/kernels/batch_norm_kernels.h"

using namespace mgpu::kernels;

#define CUDA_CHECK(call)                                                                            \
  do {                                                                                              \
    const cudaError_t error_ = (call);                                                              \
    if (error_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(error_)); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

enum class Kind { kRelu, kResidual, kPlain };  // relu(bn(x)); relu(bn(x) + r); bn(x) (a downsample)
struct Bn {
  int64_t spatial;  // H W
  int channels;
  Kind kind;
  bool fork;  // two consumers of y: the backward adds gy2
};

constexpr int64_t kBatch = 256;

// torchvision's ResNet-50 (stride on the 3x3 conv) at 224 px.
std::vector<Bn> ResNet50() {
  std::vector<Bn> bns{{112 * 112, 64, Kind::kRelu, false}};  // stem, then max-pool
  const int widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3}, sides[] = {56, 28, 14, 7};
  int previous = 56;
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t side = sides[layer], w = widths[layer];
    for (int b = 0; b < blocks[layer]; ++b) {
      const int64_t in_side = b == 0 ? previous : side;
      bns.push_back({in_side * in_side, int(w), Kind::kRelu, false});
      bns.push_back({side * side, int(w), Kind::kRelu, false});
      if (b == 0) bns.push_back({side * side, int(4 * w), Kind::kPlain, false});
      bns.push_back({side * side, int(4 * w), Kind::kResidual, !(layer == 3 && b == blocks[layer] - 1)});
    }
    previous = int(side);
  }
  return bns;
}

// ResNet-18 at 32 px: the CIFAR stem (no max-pool, its output forked).
std::vector<Bn> ResNet18() {
  std::vector<Bn> bns{{32 * 32, 64, Kind::kRelu, true}};
  const int widths[] = {64, 128, 256, 512}, sides[] = {32, 16, 8, 4};
  for (int layer = 0; layer < 4; ++layer) {
    const int64_t side = sides[layer];
    for (int b = 0; b < 2; ++b) {
      bns.push_back({side * side, widths[layer], Kind::kRelu, false});
      if (b == 0 && layer > 0) bns.push_back({side * side, widths[layer], Kind::kPlain, false});
      bns.push_back({side * side, widths[layer], Kind::kResidual, !(layer == 3 && b == 1)});
    }
  }
  return bns;
}

__device__ uint32_t Mix(uint64_t i) {
  i ^= i >> 33, i *= 0xff51afd7ed558ccdull, i ^= i >> 33, i *= 0xc4ceb9fe1a85ec53ull, i ^= i >> 33;
  return uint32_t(i);
}

// Values about offset + spread [-1, 1), rounded to T, different for every seed and element.
template <typename T>
__global__ void Fill(T* p, int64_t n, uint64_t seed, float offset, float spread) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float u = Mix(i * 0x9e3779b97f4a7c15ull + seed) * (2.f / 4294967296.f) - 1.f;
    FromFloat(offset + spread * u, &p[i]);
  }
}

// An order-free hash of n 16-bit or 32-bit words: a sum of mixed (index, value) pairs.
__global__ void Hash(const uint16_t* p16, const uint32_t* p32, int64_t n, unsigned long long* out) {
  unsigned long long h = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t v = p16 != nullptr ? p16[i] : p32[i];
    h += Mix((uint64_t(i) << 32) ^ v ^ 0x5bd1e995ull);
  }
  atomicAdd(out, h);
}

template <typename T>
T* Alloc(int64_t n) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  CUDA_CHECK(cudaMemset(p, 0, n * sizeof(T)));
  return p;
}

template <typename T>
struct Buffers {
  T *x, *residual, *y, *gy, *gy2, *gx, *gresidual;
  float *gamma, *beta, *running_mean, *running_var, *mean, *invstd, *scale, *shift, *partials, *coefficients,
      *ggamma, *gbeta;
  int64_t* batches;
  char* flush;
  unsigned long long* hash;
};

constexpr int kHashes = 5;  // y; gx; the residual's gradient; gamma's and beta's; the statistics
constexpr int64_t kFlushBytes = 256 << 20;  // several times the L2 (60 MB on an H200)

template <typename T>
Buffers<T> Allocate(int64_t elements, int channels) {
  Buffers<T> b;
  for (T** p : std::initializer_list<T**>{&b.x, &b.residual, &b.y, &b.gy, &b.gy2, &b.gx, &b.gresidual}) *p = Alloc<T>(elements);
  for (float** p : {&b.gamma, &b.beta, &b.running_mean, &b.running_var, &b.mean, &b.invstd, &b.scale, &b.shift,
                    &b.ggamma, &b.gbeta}) {
    *p = Alloc<float>(channels);
  }
  b.partials = Alloc<float>(int64_t{2} * kBnTargetBlocks * channels + 2 * channels);
  b.coefficients = Alloc<float>(3 * channels);
  b.batches = Alloc<int64_t>(1);
  b.flush = Alloc<char>(kFlushBytes);
  b.hash = Alloc<unsigned long long>(kHashes);
  return b;
}

struct Timer {
  cudaEvent_t begin, end;
  Timer() {
    CUDA_CHECK(cudaEventCreate(&begin));
    CUDA_CHECK(cudaEventCreate(&end));
  }
  template <typename B, typename Launch>
  float Median(B& b, const Launch& launch, int reps = 5) {
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
      CUDA_CHECK(cudaMemsetAsync(b.flush, r, kFlushBytes));
      CUDA_CHECK(cudaEventRecord(begin));
      CUDA_CHECK(launch());
      CUDA_CHECK(cudaEventRecord(end));
      CUDA_CHECK(cudaEventSynchronize(end));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, begin, end));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

template <typename T>
int Run(const std::string& model) {
  const std::vector<Bn> bns = model == "resnet18" ? ResNet18() : ResNet50();
  int64_t most = 0;
  int widest = 0;
  for (const Bn& bn : bns) most = std::max(most, kBatch * bn.spatial * bn.channels), widest = std::max(widest, bn.channels);
  Buffers<T> b = Allocate<T>(most, widest);
  Timer timer;
  double forward_us = 0, backward_us = 0, forward_bytes = 0, backward_bytes = 0;
  unsigned long long hash_total = 0;
  for (size_t i = 0; i < bns.size(); ++i) {
    const Bn& bn = bns[i];
    const int64_t rows = kBatch * bn.spatial, n = rows * bn.channels, C = bn.channels;
    const BatchNormShape s = MakeBatchNormShape(rows, bn.channels);
    Fill<<<1024, 256>>>(b.x, n, 11 * i + 1, 0.5f, 2.f);
    Fill<<<1024, 256>>>(b.residual, n, 11 * i + 2, 0.f, 1.f);
    Fill<<<1024, 256>>>(b.gy, n, 11 * i + 3, 0.f, 1e-2f);
    Fill<<<1024, 256>>>(b.gy2, n, 11 * i + 4, 0.f, 1e-2f);
    std::vector<float> ones(C, 1.f), zeros(C, 0.f);
    CUDA_CHECK(cudaMemcpy(b.gamma, ones.data(), C * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(b.beta, zeros.data(), C * 4, cudaMemcpyHostToDevice));
    const bool relu = bn.kind != Kind::kPlain, has_residual = bn.kind == Kind::kResidual;
    BatchNormParameters p;
    p.gamma = b.gamma, p.beta = b.beta, p.running_mean = b.running_mean, p.running_var = b.running_var;
    p.batches_tracked = b.batches;
    const BatchNormStatistics st{b.mean, b.invstd, b.scale, b.shift};
    const float f_ms = timer.Median(b, [&] {
      return LaunchBatchNormForward<T>(s, b.x, has_residual ? b.residual : nullptr, p, relu, b.partials, st, b.y,
                                          nullptr);
    });
    const float b_ms = timer.Median(b, [&] {
      return LaunchBatchNormBackward<T>(s, b.x, has_residual ? b.y : nullptr, b.gy, bn.fork ? b.gy2 : nullptr,
                                           b.gamma, st, relu, b.partials, b.coefficients, b.ggamma, b.gbeta, b.gx,
                                           has_residual ? b.gresidual : nullptr, nullptr);
    });
    forward_us += 1e3 * f_ms, backward_us += 1e3 * b_ms;
    // Bytes each pass must move: forward reads x twice (statistics, apply), the residual, writes y; the
    // backward reads x, gy (gy2), y where read, twice (sums, apply: the apply reads g back where there is a
    // residual) and writes gx (and the residual's gradient).
    const double t = double(sizeof(T)) * n;
    forward_bytes += t * (3 + has_residual);
    backward_bytes += has_residual ? t * (4 + bn.fork + 1 + 3) : t * (2 + bn.fork) * 2 + t;
    CUDA_CHECK(cudaMemset(b.hash, 0, 8 * kHashes));
    const int64_t words = n * int64_t(sizeof(T)) / 2;
    Hash<<<1024, 256>>>(reinterpret_cast<uint16_t*>(b.y), nullptr, words, b.hash);
    Hash<<<1024, 256>>>(reinterpret_cast<uint16_t*>(b.gx), nullptr, words, b.hash + 1);
    if (has_residual) Hash<<<1024, 256>>>(reinterpret_cast<uint16_t*>(b.gresidual), nullptr, words, b.hash + 2);
    for (float* q : std::initializer_list<float*>{b.ggamma, b.gbeta}) {
      Hash<<<4, 256>>>(nullptr, reinterpret_cast<uint32_t*>(q), C, b.hash + 3);
    }
    for (float* q : std::initializer_list<float*>{b.mean, b.invstd, b.running_mean, b.running_var}) {
      Hash<<<4, 256>>>(nullptr, reinterpret_cast<uint32_t*>(q), C, b.hash + 4);
    }
    unsigned long long h[kHashes];
    CUDA_CHECK(cudaMemcpy(h, b.hash, sizeof h, cudaMemcpyDeviceToHost));
    for (const unsigned long long part : h) hash_total = hash_total * 31 + part;
    if (const char* dump = std::getenv("BN_DUMP_GX"); dump != nullptr && std::atoi(dump) == int(i)) {
      // BN_DUMP_GX=i: batch norm i's gx, raw, to BN_DUMP_FILE.
      std::vector<T> gx(n);
      CUDA_CHECK(cudaMemcpy(gx.data(), b.gx, n * sizeof(T), cudaMemcpyDeviceToHost));
      FILE* f = std::fopen(std::getenv("BN_DUMP_FILE"), "wb");
      std::fwrite(gx.data(), sizeof(T), n, f);
      std::fclose(f);
    }
    if (std::getenv("BN_VERBOSE") != nullptr) {
      std::printf("  bn %2zu rows %8lld C %4d kind %d fork %d splits %4d: fwd %7.1f us %5.2f TB/s  bwd %7.1f us %5.2f TB/s"
                  "  y %04llx gx %04llx gr %04llx gp %04llx st %04llx\n",
                  i, (long long)rows, bn.channels, int(bn.kind), int(bn.fork), s.splits, 1e3 * f_ms,
                  t * (3 + has_residual) / (f_ms * 1e9), 1e3 * b_ms,
                  (has_residual ? t * (4 + bn.fork + 1 + 3) : t * (2 + bn.fork) * 2 + t) / (b_ms * 1e9), h[0] & 0xffff,
                  h[1] & 0xffff, h[2] & 0xffff, h[3] & 0xffff, h[4] & 0xffff);
    }
  }
  std::printf("%s %s: %zu batch norms  forward %8.1f us (%.2f TB/s)  backward %8.1f us (%.2f TB/s)  total %8.1f us  hash %016llx\n",
              model.c_str(), sizeof(T) == 2 ? "bf16" : "float", bns.size(), forward_us, forward_bytes / forward_us / 1e6, backward_us,
              backward_bytes / backward_us / 1e6, forward_us + backward_us, hash_total);
  return 0;
}

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "resnet50";
  return argc > 2 && std::string(argv[2]) == "float" ? Run<float>(model) : Run<Bf16>(model);
}
