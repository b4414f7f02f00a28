// How a run turned its test images into the model's input, recorded in summary.json as "input"
// so that code outside mgpu (Python, docs/GUIDE.md "Using the trained model in Python") can feed
// the trained model the same tensors and get the run's test accuracy back:
//   {"resize": "...",                   torchvision's spelling of the geometric transform
//    "height": H, "width": W,           the model's input side
//    "channels": C, "channel_order": "RGB" | "grayscale",
//    "scale": "uint8 / 255",            pixels as float32 in [0, 1] before normalization
//    "mean": [...], "std": [...],       per channel: (x - mean) / std
//    "layout": "NCHW float32"}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "data/sample_source.h"
#include "worker/train_config.h"

namespace mgpu {

// The recipe of `test` (the evaluation source) for a run of `config` whose data were loaded as
// `data_loading` ("memory" | "stream").
nlohmann::json InputRecipe(const TrainConfig& config, const std::string& data_loading, const SampleSource& test);

}  // namespace mgpu
