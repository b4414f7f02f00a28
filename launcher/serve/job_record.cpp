#include "launcher/serve/job_record.h"

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

constexpr const char* kStatusNames[] = {"queued", "running", "succeeded", "failed", "cancelled", "interrupted"};

// `json[key]` as T; throws mgpu::Error naming the key when it is missing or of another type.
template <typename T>
T Field(const nlohmann::json& json, const char* key) {
  const auto found = json.find(key);
  if (found == json.end()) throw Error(ExitCode::kFailure, fmt::format("job record without '{}'", key));
  try {
    return found->get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ExitCode::kFailure, fmt::format("job record field '{}': {}", key, e.what()));
  }
}

}  // namespace

const char* JobStatusName(JobStatus status) { return kStatusNames[static_cast<int>(status)]; }

std::optional<JobStatus> ParseJobStatus(const std::string& name) {
  for (int i = 0; i < 6; ++i) {
    if (name == kStatusNames[i]) return static_cast<JobStatus>(i);
  }
  return std::nullopt;
}

bool HasEnded(JobStatus status) { return status != JobStatus::kQueued && status != JobStatus::kRunning; }

nlohmann::json JobRecordToJson(const JobRecord& r) {
  nlohmann::json json = {
      {"id", r.id},
      {"status", JobStatusName(r.status)},
      {"config_yaml", r.config_yaml},
      {"config_name", r.config_name},
      {"model", r.model},
      {"dataset", r.dataset},
      {"mode", r.mode},
      {"epochs", r.epochs},
      {"max_steps", r.max_steps},
      {"gpus", r.gpus},
      {"world_size", r.world_size},
      {"priority", r.priority},
      {"worker_args", r.worker_args},
      {"resumes_job_id", r.resumes_job_id},
      {"job_folder", r.job_folder},
      {"run_folder", r.run_folder},
      {"devices", r.devices},
      {"submitted_unix_ms", r.submitted_unix_ms},
      {"started_unix_ms", r.started_unix_ms},
      {"ended_unix_ms", r.ended_unix_ms},
      {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nlohmann::json(nullptr)},
      {"message", r.message},
      {"cancel_requested", r.cancel_requested},
      {"result", nullptr},
  };
  if (r.result) {
    const JobResult& x = *r.result;
    json["result"] = {{"status", x.status},       {"error", x.error},
                      {"test_accuracy", x.test_accuracy}, {"test_loss", x.test_loss},
                      {"steps", x.steps},         {"total_seconds", x.total_seconds},
                      {"images_per_second", x.images_per_second}, {"resumed_from", x.resumed_from}};
  }
  return json;
}

JobRecord JobRecordFromJson(const nlohmann::json& json) {
  if (!json.is_object()) throw Error(ExitCode::kFailure, "a job record must be a JSON object");
  JobRecord r;
  r.id = Field<int64_t>(json, "id");
  if (r.id < 1) throw Error(ExitCode::kFailure, fmt::format("job record with id {} (ids start at 1)", r.id));
  const std::string status = Field<std::string>(json, "status");
  const std::optional<JobStatus> parsed = ParseJobStatus(status);
  if (!parsed) throw Error(ExitCode::kFailure, fmt::format("job {}: unknown status '{}'", r.id, status));
  r.status = *parsed;
  r.config_yaml = Field<std::string>(json, "config_yaml");
  r.config_name = Field<std::string>(json, "config_name");
  r.model = Field<std::string>(json, "model");
  r.dataset = Field<std::string>(json, "dataset");
  r.mode = Field<std::string>(json, "mode");
  r.epochs = Field<int64_t>(json, "epochs");
  r.max_steps = Field<int64_t>(json, "max_steps");
  r.gpus = Field<int>(json, "gpus");
  r.world_size = Field<int>(json, "world_size");
  r.priority = Field<int>(json, "priority");
  r.worker_args = Field<std::vector<std::string>>(json, "worker_args");
  r.resumes_job_id = Field<int64_t>(json, "resumes_job_id");
  r.job_folder = Field<std::string>(json, "job_folder");
  r.run_folder = Field<std::string>(json, "run_folder");
  r.devices = Field<std::vector<int>>(json, "devices");
  r.submitted_unix_ms = Field<int64_t>(json, "submitted_unix_ms");
  r.started_unix_ms = Field<int64_t>(json, "started_unix_ms");
  r.ended_unix_ms = Field<int64_t>(json, "ended_unix_ms");
  if (const auto exit_code = json.find("exit_code"); exit_code == json.end() || !exit_code->is_null()) {
    r.exit_code = Field<int>(json, "exit_code");
  }
  r.message = Field<std::string>(json, "message");
  r.cancel_requested = Field<bool>(json, "cancel_requested");
  const auto result = json.find("result");
  if (result != json.end() && !result->is_null()) {
    JobResult x;
    x.status = Field<std::string>(*result, "status");
    x.error = Field<std::string>(*result, "error");
    x.test_accuracy = Field<double>(*result, "test_accuracy");
    x.test_loss = Field<double>(*result, "test_loss");
    x.steps = Field<int64_t>(*result, "steps");
    x.total_seconds = Field<double>(*result, "total_seconds");
    x.images_per_second = Field<double>(*result, "images_per_second");
    x.resumed_from = Field<std::string>(*result, "resumed_from");
    r.result = x;
  }
  return r;
}

}  // namespace mgpu
