#include "worker/evaluation.h"

#include <algorithm>

#include "data/batch_loader.h"
#include "dataparallel/data_parallel.h"
#include "models/memory_format.h"

namespace mgpu {

std::vector<int64_t> EvaluatedSamples(int64_t test_size, int64_t max_samples) {
  const int64_t count = max_samples > 0 ? std::min(max_samples, test_size) : test_size;
  std::vector<int64_t> samples(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) samples[static_cast<size_t>(k)] = k * test_size / count;
  return samples;
}

namespace {

// The counts summed over the ranks, as percentages of what was evaluated.
Evaluation FromTotals(torch::Tensor totals, int64_t classes, int64_t samples) {
  totals = totals.cpu();  // (1 + 2 * classes): loss, correct per class, seen per class
  auto correct = totals.slice(0, 1, 1 + classes).to(torch::kLong);
  auto seen = totals.slice(0, 1 + classes).to(torch::kLong);
  Evaluation result;
  result.samples = samples;
  const double n = static_cast<double>(samples);
  result.loss = totals[0].item<double>() / n;
  result.accuracy = 100.0 * static_cast<double>(correct.sum().item<int64_t>()) / n;
  for (int64_t c = 0; c < classes; ++c) {
    const auto s = seen[c].item<int64_t>();
    result.per_class_accuracy.push_back(
        s > 0 ? 100.0 * static_cast<double>(correct[c].item<int64_t>()) / static_cast<double>(s) : 0.0);
  }
  return result;
}

}  // namespace

Evaluation Evaluate(Classifier& model, const std::shared_ptr<const SampleSource>& test,
                    const EvaluationOptions& options, const torch::Device& device, int rank, RankGroup& ranks) {
  torch::NoGradGuard no_grad;
  model.eval();
  BatchLoader loader(test, LoaderOptions{options.batch_size, options.num_workers, 2, device.is_cuda()});
  const std::vector<int64_t> samples = EvaluatedSamples(test->size(), options.max_samples);
  std::vector<int64_t> order;
  for (size_t i = static_cast<size_t>(rank); i < samples.size(); i += static_cast<size_t>(ranks.size())) {
    order.push_back(samples[i]);
  }
  loader.StartEpoch(std::move(order));
  const int64_t classes = test->num_classes();
  auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  auto correct = torch::zeros({classes}, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto seen = torch::zeros({classes}, torch::TensorOptions().dtype(torch::kLong).device(device));
  while (auto batch = loader.Next()) {
    auto images = ImagesInFormat(batch->images.to(device, /*non_blocking=*/true), options.channels_last);  // (B, C, H, W)
    auto labels = batch->labels.to(device, /*non_blocking=*/true);  // (B)
    auto logits = PolicyForward(model, images, options.precision);  // (B, classes)
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .to(torch::kDouble);
    auto hits = logits.argmax(1).eq(labels);
    seen += torch::bincount(labels, {}, classes);
    correct += torch::bincount(labels.masked_select(hits), {}, classes);
  }
  model.train();
  // One reduction for all counts: (loss, correct per class, seen per class).
  torch::Tensor totals = torch::cat({loss_sum.reshape(1), correct.to(torch::kDouble), seen.to(torch::kDouble)});
  ranks.Sum(totals, "evaluation counts");
  return FromTotals(totals, classes, static_cast<int64_t>(samples.size()));
}

}  // namespace mgpu
