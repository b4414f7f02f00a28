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

// Whether a run may decode on the GPU, as far as its flags tell before its data are opened:
// --decode gpu or auto, with the batches going to one CUDA device (not --mode dp). What must be
// settled before the decoder is chosen is settled by it: CUDA's work queues
// (worker/cuda_work_queues.h), the step's stream priority (cuda/step_stream.h).
bool MayDecodeOnGpu(DecodeMode mode, bool cuda_device, bool data_parallel);

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
