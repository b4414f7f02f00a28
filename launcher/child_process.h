// Starting mgpu-worker processes and waiting for them.
#pragma once

#include <string>
#include <vector>

namespace mgpu {

// The mgpu-worker next to the running executable, or $MGPU_WORKER if set.
std::string WorkerExecutable();

// Runs `argv` with stdout/stderr inherited and waits. Returns the exit code, or 128 + signal.
// Throws mgpu::Error if the program cannot be started.
int RunAndWait(const std::vector<std::string>& argv);

}  // namespace mgpu
