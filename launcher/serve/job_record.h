// One job of `mgpu serve`: what was submitted, where it ran, how it ended. The journal
// (launcher/serve/job_journal.h) stores these records as JSON, one line per change; the service
// answers its clients from them (launcher/serve/job_manager.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mgpu {

enum class JobStatus { kQueued, kRunning, kSucceeded, kFailed, kCancelled, kInterrupted };

// "queued", "running", "succeeded", "failed", "cancelled", "interrupted".
const char* JobStatusName(JobStatus status);
std::optional<JobStatus> ParseJobStatus(const std::string& name);
bool HasEnded(JobStatus status);

// A finished run's result, from its summary.json (the fields `mgpu status` shows).
struct JobResult {
  std::string status;  // "ok" | "failed"
  std::string error;
  double test_accuracy = 0;  // percent
  double test_loss = 0;
  int64_t steps = 0;
  double total_seconds = 0;
  double images_per_second = 0;  // the launcher's world throughput
  std::string resumed_from;
};

struct JobRecord {
  int64_t id = 0;  // from 1, in submission order
  JobStatus status = JobStatus::kQueued;
  std::string config_yaml;  // as submitted
  std::string config_name;  // the client's file name, for listings
  // From the validated configuration, for listings and progress.
  std::string model, dataset, mode;
  int64_t epochs = 0;
  int64_t max_steps = 0;
  int gpus = 1;        // device slots
  int world_size = 1;  // processes of its `mgpu run`
  int priority = 0;
  // The worker flags of its `mgpu run`, fixed at submission.
  std::vector<std::string> worker_args;
  int64_t resumes_job_id = 0;
  std::string job_folder;  // <state-dir>/jobs/<id>: submitted.yaml, console.log, run/
  std::string run_folder;  // the workers' --out
  std::vector<int> devices;  // slots it holds or held
  int64_t submitted_unix_ms = 0;
  int64_t started_unix_ms = 0;
  int64_t ended_unix_ms = 0;
  // Its `mgpu run`'s exit code (128 + signal); none while queued or running, when cancelled
  // before it started, or when interrupted by the service's restart (its end was not seen).
  std::optional<int> exit_code;
  std::string message;  // why it failed, was cancelled or interrupted
  bool cancel_requested = false;
  std::optional<JobResult> result;
};

nlohmann::json JobRecordToJson(const JobRecord& record);
// Throws mgpu::Error naming the field when `json` is not a job record.
JobRecord JobRecordFromJson(const nlohmann::json& json);

}  // namespace mgpu
