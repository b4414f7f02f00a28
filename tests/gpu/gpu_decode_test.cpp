// --decode gpu on a CUDA device (data/gpu_jpeg_batches.h): a batch nvJPEG decoded, cropped,
// resized, flipped and normalized on the device matches the CPU path's batch of the same samples
// and epoch, on a fixed set of JPEG codings written by the test; the codings nvJPEG does not take
// (progressive, 4:1:1, PNG, a bad header) go to the CPU path and are counted. Skipped, saying
// why, without a CUDA device or without nvJPEG.
//
// Tolerance: the CPU path decodes at libjpeg's smallest sufficient DCT scale of 1/8, 1/4, 1/2, 1
// and resizes in fixed point; the device decodes at full scale (nvJPEG's IDCT and colour
// conversion) and resizes with LibTorch's antialiased bilinear filter. Per sample, the mean absolute difference
// must stay within kMeanLevels 8-bit levels (of 255), and the 99th percentile within kP99Levels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <png.h>
#include <torch/torch.h>

#include "data/batch_loader.h"
#include "data/gpu_jpeg_batches.h"
#include "data/nvjpeg_library.h"
#include "data/streaming_images.h"
#include "tests/support/image_files.h"
#include "tests/support/test_support.h"

namespace mgpu {

// Test names and ctest's list show the decoder by name.
void PrintTo(GpuDecoderChoice decoder, std::ostream* os) { *os << (decoder == GpuDecoderChoice::kFastest ? "fastest" : "cuda"); }

namespace {

using namespace mgpu::testing;

constexpr double kMeanLevels = 3.0;
constexpr double kP99Levels = 24.0;
constexpr int64_t kSide = 64;

std::string EncodePng(int width, int height, const std::vector<uint8_t>& rgb) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&image, nullptr, &size, 0, rgb.data(), 0, nullptr);
  std::string bytes(size, '\0');
  png_image_write_to_memory(&image, bytes.data(), &size, 0, rgb.data(), 0, nullptr);
  return bytes;
}

struct Sample {
  std::string name;     // what the file codes, for messages
  std::string bytes;
  bool on_gpu = true;   // nvJPEG takes it
};

std::vector<Sample> FixedSet() {
  auto jpeg = [](int w, int h, auto set) {
    JpegVariant variant;
    set(variant);
    return EncodeJpegVariant(w, h, TestPicture(w, h), variant);
  };
  auto plain = [](JpegVariant&) {};
  return {
      {"baseline 4:2:0 320x240", jpeg(320, 240, plain)},
      {"baseline 4:2:0 odd 257x191", jpeg(257, 191, plain)},
      {"4:4:4 199x301", jpeg(199, 301, [](JpegVariant& v) { v.sampling = JpegSampling::k444; })},
      {"4:2:2 230x170", jpeg(230, 170, [](JpegVariant& v) { v.sampling = JpegSampling::k422; })},
      {"grayscale 161x123", jpeg(161, 123, [](JpegVariant& v) { v.grayscale = true; })},
      {"EXIF orientation 6, 211x149", jpeg(211, 149, [](JpegVariant& v) { v.exif = true; })},
      {"quality 60, 640x427", jpeg(640, 427, [](JpegVariant& v) { v.quality = 60; })},
      {"progressive 300x200", jpeg(300, 200, [](JpegVariant& v) { v.progressive = true; }), false},
      {"4:1:1 240x160", jpeg(240, 160, [](JpegVariant& v) { v.sampling = JpegSampling::k411; }), false},
      {"PNG 150x100", EncodePng(150, 100, TestPicture(150, 100)), false},
  };
}

class GpuDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
    if (const std::string why = WhyNoNvjpeg(); !why.empty()) GTEST_SKIP() << "no nvJPEG: " << why;
  }

  // The set written as files; `extra` appended (e.g. a bad image).
  std::shared_ptr<const StreamingImages> Source(StreamTransform transform, bool skip_bad,
                                                const std::vector<Sample>& samples) {
    EncodedSamples encoded;
    for (size_t i = 0; i < samples.size(); ++i) {
      encoded.files.push_back(dir_ / fmt::format("{:02}.img", i));
      WriteBytes(encoded.files.back(), samples[i].bytes);
      encoded.entries.push_back(EncodedSamples::Entry{0, -1, static_cast<int32_t>(i)});
      encoded.labels.push_back(static_cast<int64_t>(i % 3));
    }
    return std::make_shared<const StreamingImages>(encoded, std::vector<std::string>{"a", "b", "c"},
                                                   StreamOptions{"gpu-decode", kSide, transform, skip_bad, 7});
  }

  // The CPU path's batch of all samples in index order for `epoch`, as BatchLoader builds it.
  static Batch CpuBatch(const std::shared_ptr<const StreamingImages>& source, int64_t epoch) {
    BatchLoader loader(source, LoaderOptions{source->size(), 0});
    std::vector<int64_t> all(static_cast<size_t>(source->size()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    loader.StartEpoch(all, epoch);
    return *loader.Next();
  }

  static Batch GpuBatch(const std::shared_ptr<const StreamingImages>& source, int64_t epoch, GpuJpegBatches& gpu) {
    std::vector<int64_t> all(static_cast<size_t>(source->size()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    gpu.StartEpoch(all, epoch);
    std::optional<Batch> batch = gpu.Next();
    EXPECT_TRUE(batch.has_value());
    EXPECT_FALSE(gpu.Next().has_value()) << "one batch holds the whole set";
    return *batch;
  }

  // Per sample: the batches' difference in 8-bit levels (undoing the normalization).
  void ExpectClose(const Batch& cpu, const Batch& gpu_on_device, const std::vector<Sample>& samples,
                   const std::string& what) {
    const torch::Tensor gpu = gpu_on_device.images.cpu();
    ASSERT_EQ(gpu.sizes(), cpu.images.sizes());
    EXPECT_TRUE(torch::equal(gpu_on_device.labels.cpu(), cpu.labels)) << what << ": labels differ";
    const torch::Tensor stddev = torch::tensor({0.229f, 0.224f, 0.225f}).view({1, 3, 1, 1});
    const torch::Tensor levels = ((gpu - cpu.images) * stddev * 255.0f).abs();  // (N, 3, S, S)
    for (int64_t i = 0; i < levels.size(0); ++i) {
      const torch::Tensor diff = levels[i].flatten();
      const double mean = diff.mean().item<double>();
      const double p99 = std::get<0>(diff.sort()).index({static_cast<int64_t>(0.99 * (diff.numel() - 1))}).item<double>();
      EXPECT_LE(mean, kMeanLevels) << what << ", " << samples[static_cast<size_t>(i)].name
                                   << ": mean |GPU - CPU| = " << mean << " levels (99th percentile " << p99 << ")";
      EXPECT_LE(p99, kP99Levels) << what << ", " << samples[static_cast<size_t>(i)].name
                                 << ": 99th percentile |GPU - CPU| = " << p99 << " levels (mean " << mean << ")";
    }
  }

  TempDir dir_;
};

// Each decoder: the fastest (the JPEG engines, where the GPU has them: region decodes) and the
// CUDA decoder (full decodes, cropped on the device), which GPUs without the engines run.
class GpuDecodeEachDecoder : public GpuDecode, public ::testing::WithParamInterface<GpuDecoderChoice> {};

INSTANTIATE_TEST_SUITE_P(Decoders, GpuDecodeEachDecoder,
                         ::testing::Values(GpuDecoderChoice::kFastest, GpuDecoderChoice::kCudaOnly),
                         [](const ::testing::TestParamInfo<GpuDecoderChoice>& info) {
                           return std::string(info.param == GpuDecoderChoice::kFastest ? "Fastest" : "CudaDecoder");
                         });

TEST_P(GpuDecodeEachDecoder, RandomResizedCropsMatchTheCpuPathOverEpochsAndFallbacksAreCounted) {
  const std::vector<Sample> samples = FixedSet();
  const auto source = Source(StreamTransform::kRandomResizedCropFlip, false, samples);
  GpuJpegBatches gpu(source, torch::Device(torch::kCUDA, 0), source->size(), 3, GetParam());
  std::cout << "decoder: " << gpu.Describe() << "; device memory <= " << (gpu.MemoryBoundBytes() >> 20) << " MiB\n";
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    ExpectClose(CpuBatch(source, epoch), GpuBatch(source, epoch, gpu), samples, fmt::format("epoch {}", epoch));
  }
  const GpuDecodeStats stats = gpu.stats();
  const auto on_gpu = std::count_if(samples.begin(), samples.end(), [](const Sample& s) { return s.on_gpu; });
  EXPECT_EQ(stats.gpu_images, 3 * on_gpu) << "nvJPEG refused a chunk: " << stats.fallback_reasons.count("nvjpeg_error");
  EXPECT_EQ(stats.cpu_fallbacks, 3 * (static_cast<int64_t>(samples.size()) - on_gpu));
  EXPECT_EQ(stats.fallback_reasons.at("progressive"), 3);
  EXPECT_EQ(stats.fallback_reasons.at("unusual_sampling"), 3);
  EXPECT_EQ(stats.fallback_reasons.at("not_jpeg"), 3);
}

// More samples than one chunk holds: the chunks land at their samples' places, and every sample's
// flip is its own.
TEST_P(GpuDecodeEachDecoder, ABatchOfManyChunksMatchesTheCpuPathSampleBySample) {
  const std::vector<Sample> set = FixedSet();
  std::vector<Sample> samples;
  while (static_cast<int64_t>(samples.size()) < 2 * GpuJpegBatches::kChunkImages + 20) {
    samples.insert(samples.end(), set.begin(), set.end());
  }
  const auto source = Source(StreamTransform::kRandomResizedCropFlip, false, samples);
  GpuJpegBatches gpu(source, torch::Device(torch::kCUDA, 0), source->size(), 4, GetParam());
  ExpectClose(CpuBatch(source, 1), GpuBatch(source, 1, gpu), samples, "many chunks");
  const GpuDecodeStats stats = gpu.stats();
  const auto on_gpu = std::count_if(samples.begin(), samples.end(), [](const Sample& s) { return s.on_gpu; });
  EXPECT_EQ(stats.gpu_images, on_gpu) << "nvJPEG refused a chunk: " << stats.fallback_reasons.count("nvjpeg_error");
}

// Batches after the first: the CPU threads decode some samples while the device decodes the batch
// before (under kEverySample, all samples of all batches); each sample matches the CPU path
// wherever it was decoded, and every image is counted once.
TEST_F(GpuDecode, TheCpuAssistDecodesSamplesOfLaterBatchesAsTheCpuPathDoes) {
  const std::vector<Sample> set = FixedSet();
  constexpr int64_t kBatches = 4;
  std::vector<Sample> samples;
  for (int64_t b = 0; b < kBatches; ++b) samples.insert(samples.end(), set.begin(), set.end());
  const auto source = Source(StreamTransform::kRandomResizedCropFlip, false, samples);
  const Batch cpu = CpuBatch(source, 2);
  const auto on_gpu = std::count_if(set.begin(), set.end(), [](const Sample& s) { return s.on_gpu; });
  for (CpuAssist assist : {CpuAssist::kEverySample, CpuAssist::kWhileDeviceBusy}) {
    const bool every = assist == CpuAssist::kEverySample;
    GpuJpegBatches gpu(source, torch::Device(torch::kCUDA, 0), static_cast<int64_t>(set.size()), 3,
                       GpuDecoderChoice::kFastest, assist);
    std::vector<int64_t> all(samples.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    gpu.StartEpoch(all, 2);
    std::vector<torch::Tensor> images, labels;
    while (std::optional<Batch> batch = gpu.Next()) {
      images.push_back(batch->images.cpu());
      labels.push_back(batch->labels.cpu());
    }
    ASSERT_EQ(static_cast<int64_t>(images.size()), kBatches);
    Batch whole;
    whole.images = torch::cat(images);
    whole.labels = torch::cat(labels);
    ExpectClose(cpu, whole, samples, every ? "every sample assisted" : "assisted while the device is busy");
    const GpuDecodeStats stats = gpu.stats();
    EXPECT_EQ(stats.gpu_images + stats.cpu_assisted, kBatches * on_gpu);
    EXPECT_EQ(stats.cpu_fallbacks, kBatches * (static_cast<int64_t>(set.size()) - on_gpu));
    if (!every) continue;
    EXPECT_EQ(stats.gpu_images, 0);
    EXPECT_TRUE(torch::allclose(whole.images, cpu.images, 0, 1e-5)) << "the CPU path's pixels, to float rounding";
  }
  GpuJpegBatches off(source, torch::Device(torch::kCUDA, 0), static_cast<int64_t>(set.size()), 3,
                     GpuDecoderChoice::kFastest, CpuAssist::kOff);
  std::vector<int64_t> all(samples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  off.StartEpoch(all, 2);
  while (off.Next()) {
  }
  EXPECT_EQ(off.stats().cpu_assisted, 0);
  EXPECT_EQ(off.stats().gpu_images, kBatches * on_gpu);
}

// A sample the CPU assist claims and the CPU path refuses (libjpeg stops at a stream cut short
// inside the crop) goes to the device: decoded there, or where nvJPEG refuses it too, to the CPU
// path's --on-bad-image; never counted as assisted, and no other sample is lost.
TEST_F(GpuDecode, ASampleTheAssistCannotDecodeGoesToTheDevice) {
  std::vector<Sample> samples = FixedSet();
  const std::string& whole = samples.front().bytes;
  samples.push_back({"baseline cut at a third", whole.substr(0, whole.size() / 3)});
  const auto source = Source(StreamTransform::kResizeCenterCrop, true, samples);
  GpuJpegBatches gpu(source, torch::Device(torch::kCUDA, 0), source->size(), 3, GpuDecoderChoice::kFastest,
                     CpuAssist::kEverySample);
  const Batch batch = GpuBatch(source, 0, gpu);
  const GpuDecodeStats stats = gpu.stats();
  const auto on_gpu = std::count_if(samples.begin(), samples.end(), [](const Sample& s) { return s.on_gpu; });
  EXPECT_EQ(stats.cpu_assisted, on_gpu - 1) << "every readable sample of nvJPEG's codings, by the assist";
  const int64_t refused = stats.fallback_reasons.count("nvjpeg_error") ? stats.fallback_reasons.at("nvjpeg_error") : 0;
  EXPECT_EQ(stats.gpu_images + refused, 1) << "the cut sample, on the device (decoded or refused)";
  EXPECT_EQ(source->skipped(), refused) << "refused by both decoders: skipped, as --on-bad-image skip says";
  samples.pop_back();
  const Batch cpu = CpuBatch(Source(StreamTransform::kResizeCenterCrop, true, samples), 0);
  const int64_t kept = static_cast<int64_t>(samples.size());
  Batch rest;
  rest.images = batch.images.narrow(0, 0, kept);
  rest.labels = batch.labels.narrow(0, 0, kept);
  ExpectClose(cpu, rest, samples, "the samples beside the cut one");
}

// A device other than the calling thread's current one (every rank but the first of a DDP job
// whose threads never call set_device): the batches are made there and match the CPU path.
// (Before the producer's threads set their device: "CUDA error: invalid resource handle" on
// cuda:1, single process and DDP, 2x H100, 2026-11-26.)
TEST_F(GpuDecode, BatchesOnTheLastDeviceMatchTheCpuPathWhileTheCallerIsOnTheFirst) {
  const int64_t devices = static_cast<int64_t>(torch::cuda::device_count());
  if (devices < 2) GTEST_SKIP() << "one CUDA device visible: needs two";
  const torch::Device last(torch::kCUDA, static_cast<c10::DeviceIndex>(devices - 1));
  const std::vector<Sample> set = FixedSet();
  std::vector<Sample> samples = set;
  samples.insert(samples.end(), set.begin(), set.end());  // two batches: the second one assisted
  const auto source = Source(StreamTransform::kRandomResizedCropFlip, false, samples);
  GpuJpegBatches gpu(source, last, static_cast<int64_t>(set.size()), 3);
  std::vector<int64_t> all(samples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  gpu.StartEpoch(all, 1);
  std::vector<torch::Tensor> images, labels;
  while (std::optional<Batch> batch = gpu.Next()) {
    EXPECT_EQ(batch->images.device(), last);
    images.push_back(batch->images.cpu());
    labels.push_back(batch->labels.cpu());
  }
  ASSERT_EQ(images.size(), 2u);
  Batch whole;
  whole.images = torch::cat(images);
  whole.labels = torch::cat(labels);
  ExpectClose(CpuBatch(source, 1), whole, samples, "on " + last.str());
}

// Batches in the model's channels-last layout (--channels-last) hold the values of the NCHW ones,
// those the CPU path decoded (the fallbacks) included: the layout is where they are written, not
// what. Without the CPU assist, so that each sample's decoder is the same in both runs.
TEST_F(GpuDecode, ChannelsLastBatchesHoldTheValuesOfNchwOnes) {
  const std::vector<Sample> samples = FixedSet();
  const auto source = Source(StreamTransform::kRandomResizedCropFlip, false, samples);
  std::vector<Batch> batches;
  for (torch::MemoryFormat format : {torch::MemoryFormat::Contiguous, torch::MemoryFormat::ChannelsLast}) {
    GpuJpegBatches gpu(source, torch::Device(torch::kCUDA, 0), source->size(), 2, GpuDecoderChoice::kFastest,
                       CpuAssist::kOff, format);
    batches.push_back(GpuBatch(source, 1, gpu));
    EXPECT_TRUE(batches.back().images.is_contiguous(format)) << format;
  }
  EXPECT_TRUE(torch::equal(batches[0].images.cpu(), batches[1].images.cpu()));
  ExpectClose(CpuBatch(source, 1), batches[1], samples, "channels-last");
}

TEST_F(GpuDecode, CentreCropsMatchTheCpuPath) {
  const std::vector<Sample> samples = FixedSet();
  const auto source = Source(StreamTransform::kResizeCenterCrop, false, samples);
  GpuJpegBatches gpu(source, torch::Device(torch::kCUDA, 0), source->size(), 1);
  ExpectClose(CpuBatch(source, 0), GpuBatch(source, 0, gpu), samples, "centre crop");
}

TEST_F(GpuDecode, ABadImageKeepsOnBadImagesMeaning) {
  std::vector<Sample> samples = FixedSet();
  samples.push_back({"bad header", "\xFF\xD8\xFF broken", false});
  const auto skipping = Source(StreamTransform::kRandomResizedCropFlip, true, samples);
  GpuJpegBatches gpu(skipping, torch::Device(torch::kCUDA, 0), skipping->size(), 2);
  const Batch batch = GpuBatch(skipping, 0, gpu);
  EXPECT_EQ(skipping->skipped(), 1) << "skip: replaced by the next readable sample and counted";
  EXPECT_EQ(gpu.stats().fallback_reasons.at("bad_header"), 1);
  EXPECT_EQ(batch.labels.cpu()[static_cast<int64_t>(samples.size() - 1)].item<int64_t>(), 0)
      << "the bad last sample is replaced by sample 0, label included";

  const auto failing = Source(StreamTransform::kRandomResizedCropFlip, false, samples);
  GpuJpegBatches strict(failing, torch::Device(torch::kCUDA, 0), failing->size(), 2);
  strict.StartEpoch({0, 1, static_cast<int64_t>(samples.size() - 1)}, 0);
  try {
    strict.Next();
    FAIL() << "--on-bad-image fail: a bad image did not stop the batch";
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("{:02}.img", samples.size() - 1)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mgpu
