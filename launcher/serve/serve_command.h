// `mgpu serve`: owns this host's devices and runs submitted jobs (launcher/serve/job_manager.h)
// behind the JobService (launcher/serve/job_service.h) until SIGINT, SIGTERM or SIGHUP (unless
// ignored on entry, as under nohup), which stop the running jobs (recorded interrupted, resumable
// from their checkpoints) and exit 0.
#pragma once

#include <string>
#include <vector>

namespace mgpu {

// `args` follow `mgpu serve`. Returns the exit code: 0 after a requested stop, 2 for bad flags
// or a state folder in use, 1 otherwise.
int ServeMain(const std::vector<std::string>& args);

}  // namespace mgpu
