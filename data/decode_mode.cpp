#include "data/decode_mode.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/status.h"
#include "data/jpeg_header.h"
#include "data/nvjpeg_library.h"
#include "data/streaming_images.h"

namespace mgpu {
namespace {

// --decode auto looks at this many samples: enough to tell a JPEG set from a PNG one.
constexpr int64_t kSamplesProbed = 16;

// "" when the circumstances allow GPU decoding, else why not.
std::string WhyNotGpu(const DecodeCircumstances& c) {
  const auto* streaming = dynamic_cast<const StreamingImages*>(c.train);
  if (streaming == nullptr) {
    return "the training set is held decoded in memory (GPU decoding serves --data-loading stream of "
           "--dataset imagefolder or webdataset)";
  }
  if (c.data_parallel) return "--mode dp copies host batches to its replicas (use --mode single or ddp)";
  if (!c.cuda_device) return "the training device is not a CUDA device (--device cpu, or no GPU visible)";
  return WhyNoNvjpeg();
}

// How many of the first samples are JPEGs that nvJPEG takes, of how many read.
std::pair<int64_t, int64_t> ProbeJpegs(const StreamingImages& source) {
  int64_t jpegs = 0, read = 0;
  for (int64_t i = 0; i < std::min(kSamplesProbed, source.size()); ++i) {
    try {
      const std::vector<uint8_t> bytes = source.ReadEncoded(i);
      ++read;
      if (RouteForGpu(ReadJpegHeader(bytes.data(), bytes.size())) == GpuDecodeRoute::kGpu) ++jpegs;
    } catch (const BadInputError&) {
      // An unreadable file is the loader's to report, with --on-bad-image's rules.
    }
  }
  return {jpegs, read};
}

}  // namespace

DecodeMode ParseDecodeMode(const std::string& text) {
  if (text == "cpu") return DecodeMode::kCpu;
  if (text == "gpu") return DecodeMode::kGpu;
  if (text == "auto") return DecodeMode::kAuto;
  throw BadInputError(fmt::format("--decode '{}' is not one of: cpu, gpu, auto", text));
}

bool MayDecodeOnGpu(DecodeMode mode, bool cuda_device, bool data_parallel) {
  return mode != DecodeMode::kCpu && cuda_device && !data_parallel;
}

DecodeChoice ChooseDecoder(DecodeMode mode, const DecodeCircumstances& circumstances) {
  if (mode == DecodeMode::kCpu) return DecodeChoice{false, "cpu (--decode cpu)"};
  const std::string why_not = WhyNotGpu(circumstances);
  if (mode == DecodeMode::kGpu && !why_not.empty()) {
    throw BadInputError(fmt::format("--decode gpu: {}; or pass --decode cpu (or auto)", why_not));
  }
  if (!why_not.empty()) return DecodeChoice{false, "cpu (--decode auto: " + why_not + ")"};
  const auto& source = dynamic_cast<const StreamingImages&>(*circumstances.train);
  if (mode == DecodeMode::kAuto) {
    const auto [jpegs, read] = ProbeJpegs(source);
    if (read == 0 || jpegs * 2 < read) {
      return DecodeChoice{false, fmt::format("cpu (--decode auto: {} of the first {} images are JPEGs that nvJPEG "
                                             "decodes)", jpegs, read)};
    }
  }
  return DecodeChoice{true, fmt::format("gpu (nvJPEG{})", mode == DecodeMode::kAuto ? ", --decode auto" : "")};
}

}  // namespace mgpu
