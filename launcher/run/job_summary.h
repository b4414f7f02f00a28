// The job-level part of summary.json that `mgpu run` adds: a `launcher` section (nodes, ranks,
// attempts, the root cause of a failure, world throughput, per-rank timing). Rank 0's summary
// keeps every contract field; when rank 0 never wrote one, the launcher writes the contract
// fields it knows (the configuration, status "failed", the error).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "launcher/run/job_state.h"
#include "config/train_config.h"

namespace mgpu {

// What stopped a job, as the launcher reports it.
struct JobFailure {
  std::string kind;  // "failed" (a worker exited or reported an error), "hung", "node-lost" (a
                     // node's launcher stopped reporting), "node-absent" (one never joined),
                     // "interrupted"
  int rank = -1;     // -1: no rank (interrupted)
  std::string host;
  int64_t pid = 0;
  int exit_code = 1;  // what `mgpu run` exits with
  int signal = 0;     // the signal that ended the rank, if one did
  std::string error;  // the worker's reported error, else the tail of its output
  bool reported_error = false;
  int64_t step = 0, epoch = 0;
  std::string phase;
  int64_t unix_millis = 0;
  std::string message;  // the one-line report printed and stored
};

struct JobReport {
  int nnodes = 1;
  int nproc_per_node = 1;
  int attempts = 1;
  double seconds = 0;
  std::string coordinator;
  std::optional<JobFailure> failure;
};

// Reads <out>/summary.json (rank 0's) or starts one from `config`, adds the launcher section,
// sets status/error from a failure, and writes it back atomically.
void WriteJobSummary(const std::string& out, const TrainConfig& config, int world_size, const JobReport& report,
                     const std::vector<RankView>& ranks);

// The job's images per second from summary.json's `launcher` record (0 when it has none).
double WorldImagesPerSecond(const nlohmann::json& launcher);

}  // namespace mgpu
