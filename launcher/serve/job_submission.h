// Whether `mgpu serve` accepts a submitted job, and the `mgpu run` command it will run it with.
//
// A submission is refused (BadInputError, the message in terms of the client's file name) for
// anything that would fail at start: the checks `mgpu run` makes before any worker starts
// (ParseJobWorkerConfig: unknown keys, wrong types, bad values, options mgpu run owns), a device
// count the service cannot give or the mode cannot use, a device the slots do not have, a path
// outside the folders the job may use or a plugin the service does not allow
// (launcher/serve/job_paths.h), and a data set whose files are missing on the service's host.
// Relative paths are taken from the job folder (jobs do not run in the client's folder), and
// passed to the job as absolute flags.
//
// The service decides, as flags that win over the configuration: each job's output folder
// (--out <job folder>/run), plain progress lines (--progress lines), --device cpu on CPU slots
// where the configuration says auto, the CPU replicas of mode dp on CPU slots, periodic
// checkpoints where the configuration has none (--checkpoint-every, so that an interrupted job
// can be resumed), and --resume for a resumed job.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/serve/job_paths.h"
#include "launcher/serve/job_record.h"
#include "launcher/serve/serve_options.h"
#include "config/train_config.h"

namespace mgpu {

struct Submission {
  std::string config_yaml;
  std::string config_name;  // for messages and listings
  int gpus = 1;
  int priority = 0;
  int64_t resumes_job_id = 0;
  std::string resume_checkpoint;  // with resumes_job_id: the checkpoint to continue from
};

// Checks `submission` as job `id` and returns its queued record. Writes the configuration to
// <job_folder>/submitted.yaml (removing the folder again when refused). Throws BadInputError
// with the reason.
JobRecord PrepareJob(int64_t id, const Submission& submission, const std::string& job_folder,
                     const DeviceSlots& slots, int64_t checkpoint_every, const PathPolicy& paths);

// Throws BadInputError when the data set's files are not where the job would read them (the
// folder, and the files each data set needs); reads none of them.
void CheckDataFiles(const TrainConfig& config);

}  // namespace mgpu
