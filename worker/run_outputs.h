// Everything a run writes into its output folder (docs/RUN_FOLDER.md):
//   config.yaml, logs/rank-K.log, metrics.csv, events.out.tfevents.*, summary.json.
// Rank 0 writes the shared files; every rank writes its own log. summary.json is written
// atomically, on success and on failure alike, so a crashed run still says why.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>

#include "report/csv_writer.h"
#include "report/tensorboard_writer.h"
#include "worker/step_timeline.h"

namespace mgpu {

struct StepMetrics {
  int64_t step = 0;
  int64_t epoch = 0;
  double loss = 0;
  double lr = 0;
  double loss_scale = 1;
  double step_seconds = 0;       // mean time per optimizer step since the previous row: the sum of
                                 // the phases (device time on a GPU, deferred_rows.h)
  double data_wait_seconds = 0;  // host time waiting for batches, per step
  double images_per_second = 0;  // over every rank, from step_seconds
  PhaseSeconds phase_seconds;    // mean per step, measured on the training device (step_timeline.h)
  // Host wall time from the start of this process's training loop to the launch of the row's last
  // step. On a GPU the host runs ahead of the device by a lead that changes, so rows' differences
  // give the rate steps were launched at; the rate they ran at is step_seconds' (docs/RUN_FOLDER.md).
  double elapsed_seconds = 0;
};

class RunOutputs {
 public:
  // Creates `folder` (and logs/) and the rank's log. Rank 0 also opens metrics.csv, and with the
  // first scalar a TensorBoard event file in each of `event_folders` (created if missing; usually
  // `folder`): a run that fails before it has a scalar (a bad data set) leaves no empty event file
  // for TensorBoard to list. Throws mgpu::Error if a folder cannot be written.
  RunOutputs(const std::string& folder, int rank, const std::vector<std::string>& event_folders);

  const std::string& folder() const { return folder_; }
  spdlog::logger& log() { return *logger_; }
  bool writes_shared_files() const { return rank_ == 0; }

  void WriteConfig(const std::string& yaml);
  void AppendStep(const StepMetrics& metrics);
  void AddScalar(const std::string& tag, double value, int64_t step);
  void WriteSummary(const nlohmann::json& summary);

 private:
  std::string folder_;
  int rank_;
  std::shared_ptr<spdlog::logger> logger_;
  std::unique_ptr<CsvWriter> metrics_;
  std::vector<std::string> event_folders_;  // rank 0's; their writers are opened by the first AddScalar
  std::vector<std::unique_ptr<TensorBoardWriter>> events_;
};

}  // namespace mgpu
