// The evaluation at an epoch's end: test loss, accuracy and per-class accuracy over every rank's
// share of the test images.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "amp/precision.h"
#include "data/sample_source.h"
#include "models/classifier.h"
#include "worker/rank_group.h"

namespace mgpu {

struct Evaluation {
  int64_t samples = 0;                     // test images evaluated, over every rank
  double loss = 0;
  double accuracy = 0;                     // percent
  std::vector<double> per_class_accuracy;  // percent
};

// The test images evaluated: all of them, or `max_samples` (> 0) spread evenly over the test set,
// so that a folder sorted by class still has every class in the sample.
std::vector<int64_t> EvaluatedSamples(int64_t test_size, int64_t max_samples);

// How one rank evaluates.
struct EvaluationOptions {
  int64_t batch_size = 0;
  int64_t max_samples = 0;  // --eval-max-samples; 0: every test image
  int num_workers = 0;      // loader threads (streamed test images are decoded as they are read)
  Precision precision = Precision::kFp32;
  bool channels_last = false;
};

// Each rank evaluates every ranks.size()-th of the EvaluatedSamples; the counts are summed over
// the ranks (a collective: every rank calls it). Leaves `model` in training mode.
Evaluation Evaluate(Classifier& model, const std::shared_ptr<const SampleSource>& test,
                    const EvaluationOptions& options, const torch::Device& device, int rank, RankGroup& ranks);

}  // namespace mgpu
