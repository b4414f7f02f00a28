// --decode cpu|gpu|auto: where a streamed JPEG data set (imagefolder, webdataset with
// --data-loading stream) is decoded.
//   cpu   the loader threads decode with libjpeg-turbo (data/streaming_images.h)
//   gpu   the loader threads read files, parse headers and draw the crops; nvJPEG decodes the
//         batch on the training device (data/gpu_jpeg_batches.h). Refused (BadInputError, exit
//         2) where it cannot run: no CUDA device, no nvJPEG, data held in memory, --mode dp.
//   auto  gpu where all of that holds and the data set's first images are JPEGs, else cpu.
#pragma once

#include <string>

#include "data/sample_source.h"

namespace mgpu {

enum class DecodeMode { kCpu, kGpu, kAuto };

// Throws BadInputError for anything but cpu, gpu or auto.
DecodeMode ParseDecodeMode(const std::string& text);

struct DecodeChoice {
  bool gpu = false;
  std::string why;  // for the start-up table, e.g. "gpu (nvJPEG 13.0.1, ...)" or "cpu (--decode auto: ...)"
};

// Where the run in these circumstances decodes. `where_batches_go` is the training device, or
// the CPU for --mode dp (whose replicas copy host batches); `train` the training set's source.
// Throws BadInputError for --decode gpu where it cannot run, naming what is missing.
struct DecodeCircumstances {
  bool cuda_device = false;   // the batches go to one CUDA device
  bool data_parallel = false; // --mode dp
  const SampleSource* train = nullptr;
};
DecodeChoice ChooseDecoder(DecodeMode mode, const DecodeCircumstances& circumstances);

}  // namespace mgpu
