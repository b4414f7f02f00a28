// What a job of `mgpu serve` has written so far, read from its run folder (the files every run
// writes, docs/RUN_FOLDER.md): progress from the last row of metrics.csv, the result from
// summary.json. No worker plumbing: the service reads what `mgpu run` leaves anyway.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "launcher/serve/job_record.h"

namespace mgpu {

struct JobProgress {
  int64_t step = 0;
  int64_t epoch = 0;  // from 1
  double loss = 0;
  double images_per_second = 0;
};

// The last complete row of <run_folder>/metrics.csv, or nullopt before the first one. Reads
// only the file's head and tail, however long the run.
std::optional<JobProgress> ReadProgress(const std::string& run_folder);

// The result in <run_folder>/summary.json, or nullopt when there is none or it is unreadable.
std::optional<JobResult> ReadResult(const std::string& run_folder);

// The checkpoint a job leaves for `mgpu submit --resume`: <run_folder>/checkpoints/latest.ckpt.
std::string LatestCheckpoint(const std::string& run_folder);

}  // namespace mgpu
