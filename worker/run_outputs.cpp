#include "worker/run_outputs.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "common/files.h"
#include "worker/worker_status.h"

namespace mgpu {

RunOutputs::RunOutputs(const std::string& folder, int rank, const std::vector<std::string>& event_folders)
    : folder_(folder), rank_(rank) {
  MakeDirectories(folder_ + "/logs");
  const std::string prefix = "[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%l] %v";
  auto file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(
      folder_ + "/logs/rank-" + std::to_string(rank) + ".log", /*truncate=*/true);
  file_sink->set_pattern(prefix);
  auto console_sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  console_sink->set_pattern("[rank " + std::to_string(rank) + "] %v");
  logger_ = std::make_shared<spdlog::logger>("rank-" + std::to_string(rank),
                                             spdlog::sinks_init_list{file_sink, console_sink});
  logger_->flush_on(spdlog::level::info);
  if (writes_shared_files()) {
    std::vector<std::string> columns{"step",       "epoch",         "loss",
                                     "lr",         "loss_scale",    "step_seconds",
                                     "data_wait_seconds", "images_per_second"};
    for (size_t i = 0; i < kStepPhaseCount; ++i) {
      columns.push_back(std::string(StepPhaseName(static_cast<StepPhase>(i))) + "_seconds");
    }
    columns.push_back("elapsed_seconds");
    metrics_ = std::make_unique<CsvWriter>(folder_ + "/metrics.csv", columns);
    event_folders_ = event_folders;
  }
}

void RunOutputs::WriteConfig(const std::string& yaml) {
  if (writes_shared_files()) WriteFileAtomically(folder_ + "/config.yaml", yaml);
}

void RunOutputs::AppendStep(const StepMetrics& m) {
  WorkerStatus::Current().PublishMetrics(m);
  if (!metrics_) return;
  std::vector<std::string> row{std::to_string(m.step),         std::to_string(m.epoch),
                               CsvWriter::Number(m.loss),          CsvWriter::Number(m.lr),
                               CsvWriter::Number(m.loss_scale),    CsvWriter::Number(m.step_seconds),
                               CsvWriter::Number(m.data_wait_seconds), CsvWriter::Number(m.images_per_second)};
  for (double seconds : m.phase_seconds.seconds) row.push_back(CsvWriter::Number(seconds));
  row.push_back(CsvWriter::Number(m.elapsed_seconds));
  metrics_->AppendRow(row);
  AddScalar("train/loss", m.loss, m.step);
  AddScalar("train/lr", m.lr, m.step);
  AddScalar("train/loss_scale", m.loss_scale, m.step);
  AddScalar("train/images_per_second", m.images_per_second, m.step);
}

void RunOutputs::AddScalar(const std::string& tag, double value, int64_t step) {
  if (events_.empty()) {
    for (const std::string& events_folder : event_folders_) {
      MakeDirectories(events_folder);
      events_.push_back(std::make_unique<TensorBoardWriter>(events_folder));
    }
  }
  for (const auto& events : events_) events->AddScalar(tag, value, step);
}

void RunOutputs::WriteSummary(const nlohmann::json& summary) {
  if (writes_shared_files()) WriteFileAtomically(folder_ + "/summary.json", summary.dump(2) + "\n");
}

}  // namespace mgpu
