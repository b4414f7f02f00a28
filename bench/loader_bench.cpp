// mgpu-loader-bench: throughput of the streaming image loader alone (no model): read, decode,
// RandomResizedCrop(224) + horizontal flip, normalize, batch, as training with
// --data-loading stream --augment rrc-flip --resize 224 does, on an ImageFolder's training split.
//
//   mgpu-loader-bench --data-dir DIR [--num-workers N] [--batch-size 256] [--size 224]
//                     [--max-images M] [--seed S] [--decode cpu|gpu] [--device K]
//                     [--gpu-decoder fastest|cuda] [--cpu-assist true|false]
//                     [--pixels normalized|uint8]
//
// --pixels uint8 times the batches as mgpu-worker's loader makes them for one GPU: the samples'
// uint8 pixels, which the device normalizes after the copy (data/device_prefetcher.h), so the
// loader threads skip the float conversion; the default, normalized float32, is what a CPU run
// gets and what loader_reference.py's DataLoader (ToTensor + Normalize) makes.
//
// --decode gpu times the nvJPEG path instead (data/gpu_jpeg_batches.h): the N threads read files,
// parse headers and draw crops, the device decodes, crops, resizes and normalizes; the clock stops
// when the last batch is complete on the device. The JSON line then adds decode ("gpu"), device,
// decoder (nvJPEG's backend), gpu_images, cpu_assisted and cpu_fallbacks: decode-only img/s per GPU, beside the
// CPU loader's img/s per core of --decode cpu. --gpu-decoder cuda measures the CUDA decoder, as on
// a GPU without JPEG engines; --cpu-assist false, the device alone, without the threads decoding
// samples beside it (cpu_assisted counts those).
//
// DIR holds DIR/train/<class>/*.jpg (bench/make_jpeg_folder.py writes one). The epoch order is
// a seeded shuffle; --max-images stops after the batches covering M images (0: the whole
// epoch). Prints one JSON line: images, seconds (from the loader's construction to the last
// batch, thread start-up included, as PyTorch's DataLoader is timed in loader_reference.py),
// images_per_second, index_seconds (listing the folder, before the clock starts) and
// peak_rss_bytes (the process's peak resident memory, getrusage's ru_maxrss, file list included).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/files.h"
#include "common/status.h"
#include "data/batch_loader.h"
#include "data/batch_source.h"
#include "data/gpu_jpeg_batches.h"
#include "data/streaming_images.h"

namespace mgpu {
namespace {

struct Options {
  std::string data_dir;
  int num_workers = 0;
  int64_t batch_size = 256;
  int64_t size = 224;
  int64_t max_images = 0;
  uint64_t seed = 0;
  std::string decode = "cpu";  // cpu | gpu
  int device = 0;              // --decode gpu: the CUDA device's index
  GpuDecoderChoice gpu_decoder = GpuDecoderChoice::kFastest;
  CpuAssist cpu_assist = CpuAssist::kWhileDeviceBusy;
  BatchPixels pixels = BatchPixels::kNormalized;  // --decode cpu
};

// A loader's batches as it makes them: uint8 ones stay so, their normalization being the GPU's.
class LoaderBatches : public BatchSource {
 public:
  explicit LoaderBatches(BatchLoader& loader) : loader_(loader) {}
  void StartEpoch(std::vector<int64_t> indices, int64_t epoch) override { loader_.StartEpoch(std::move(indices), epoch); }
  std::optional<Batch> Next() override { return loader_.Next(); }

 private:
  BatchLoader& loader_;
};

// An option taking one of `names` (any case) into `value`.
template <typename Enum>
void AddChoice(CLI::App& app, const std::string& flag, Enum& value, const std::map<std::string, Enum>& names,
               const std::string& help) {
  app.add_option(flag, value, help)->transform(CLI::CheckedTransformer(names, CLI::ignore_case));
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Run(const Options& options) {
  using Clock = std::chrono::steady_clock;
  const auto index_start = Clock::now();
  EncodedDataset listing = ListStreamingImageFolder(options.data_dir);
  const double index_seconds = SecondsSince(index_start);
  auto source = std::make_shared<const StreamingImages>(
      std::move(listing.train), listing.class_names,
      StreamOptions{"bench/train", options.size, StreamTransform::kRandomResizedCropFlip, false, options.seed});
  std::vector<int64_t> order(static_cast<size_t>(source->size()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(options.seed));
  if (options.max_images > 0 && options.max_images < source->size()) {
    const int64_t batches = (options.max_images + options.batch_size - 1) / options.batch_size;
    order.resize(static_cast<size_t>(std::min<int64_t>(batches * options.batch_size, source->size())));
  }

  const auto start = Clock::now();
  std::optional<BatchLoader> loader;
  std::unique_ptr<BatchSource> batches;
  GpuJpegBatches* gpu = nullptr;
  if (options.decode == "gpu") {
    if (!torch::cuda::is_available()) throw BadInputError("--decode gpu: no CUDA device is visible to this process");
    auto decoder = std::make_unique<GpuJpegBatches>(source, torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(options.device)),
                                                    options.batch_size, options.num_workers, options.gpu_decoder,
                                                    options.cpu_assist);
    gpu = decoder.get();
    batches = std::move(decoder);
  } else {
    LoaderOptions loading{options.batch_size, options.num_workers, 2};
    loading.pixels = options.pixels;
    loader.emplace(source, loading);
    batches = std::make_unique<LoaderBatches>(*loader);
  }
  batches->StartEpoch(order, 0);
  int64_t images = 0;
  torch::Tensor checksum = torch::zeros({}, torch::kFloat64);  // touches every batch
  while (auto batch = batches->Next()) {
    images += batch->labels.size(0);
    checksum = checksum + batch->images[0][0][0][0].to(torch::kCPU, torch::kFloat64);
  }
  const double checksum_value = checksum.item<double>();  // waits for the device's last batch
  const double seconds = SecondsSince(start);
  nlohmann::json line{{"loader", "mgpu"},
                      {"decode", options.decode},
                      {"num_workers", options.num_workers},
                      {"pixels", options.decode == "gpu" || options.pixels == BatchPixels::kNormalized ? "normalized"
                                                                                                     : "uint8"},
                      {"batch_size", options.batch_size},
                      {"size", options.size},
                      {"images", images},
                      {"dataset_images", source->size()},
                      {"seconds", seconds},
                      {"images_per_second", static_cast<double>(images) / seconds},
                      {"index_seconds", index_seconds},
                      {"peak_rss_bytes", PeakRssBytes()},
                      {"checksum", checksum_value}};
  if (gpu != nullptr) {
    const GpuDecodeStats stats = gpu->stats();
    line["device"] = fmt::format("cuda:{}", options.device);
    line["decoder"] = gpu->Describe();
    line["gpu_images"] = stats.gpu_images;
    line["cpu_assisted"] = stats.cpu_assisted;
    line["cpu_fallbacks"] = stats.cpu_fallbacks;
  }
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace
}  // namespace mgpu

int main(int argc, char** argv) {
  mgpu::Options options;
  CLI::App app{"Throughput of mgpu's streaming image loader (decode + RandomResizedCrop + flip + normalize)"};
  app.add_option("--data-dir", options.data_dir, "ImageFolder root: DIR/train/<class>/*.jpg")->required();
  app.add_option("--num-workers", options.num_workers, "loader threads (0: the calling thread)")->check(CLI::Range(0, 1024));
  app.add_option("--batch-size", options.batch_size, "images per batch")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--size", options.size, "output side (RandomResizedCrop)")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app.add_option("--max-images", options.max_images, "stop after the batches covering this many images (0: one epoch)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--seed", options.seed, "shuffle and crop seed");
  app.add_option("--decode", options.decode, "cpu: the loader threads decode; gpu: nvJPEG on --device")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  app.add_option("--device", options.device, "--decode gpu: the CUDA device's index")->check(CLI::Range(0, 1023));
  const std::map<std::string, mgpu::GpuDecoderChoice> decoders{{"fastest", mgpu::GpuDecoderChoice::kFastest},
                                                                {"cuda", mgpu::GpuDecoderChoice::kCudaOnly}};
  mgpu::AddChoice(app, "--gpu-decoder", options.gpu_decoder, decoders,
                  "--decode gpu: fastest (the GPU's JPEG engines where it has them, as mgpu-worker decodes) "
                  "or cuda (nvJPEG's GPU-hybrid backend, as on a GPU without them)");
  const std::map<std::string, mgpu::CpuAssist> assists{
      {"true", mgpu::CpuAssist::kWhileDeviceBusy}, {"on", mgpu::CpuAssist::kWhileDeviceBusy},
      {"false", mgpu::CpuAssist::kOff}, {"off", mgpu::CpuAssist::kOff}};
  mgpu::AddChoice(app, "--cpu-assist", options.cpu_assist, assists,
                  "--decode gpu: true (the threads decode samples of the next batch while the device decodes, as "
                  "mgpu-worker does by default) or false (the device alone, as mgpu-worker --cpu-assist false)");
  const std::map<std::string, mgpu::BatchPixels> pixels{{"normalized", mgpu::BatchPixels::kNormalized},
                                                        {"uint8", mgpu::BatchPixels::kRaw}};
  mgpu::AddChoice(app, "--pixels", options.pixels, pixels,
                  "--decode cpu: normalized (float32 batches, as a CPU run and PyTorch's DataLoader reference make "
                  "them) or uint8 (as mgpu-worker's loader makes them for one GPU, which normalizes them)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int printed = app.exit(e);  // prints the help, or the error
    return e.get_exit_code() == 0 ? printed : static_cast<int>(mgpu::ExitCode::kBadInput);
  }
  try {
    return mgpu::Run(options);
  } catch (const mgpu::Error& e) {
    std::cerr << "mgpu-loader-bench: " << e.what() << std::endl;
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "mgpu-loader-bench: " << e.what() << std::endl;
    return 1;
  }
}
