// Starting mgpu-worker (or mgpu run) processes and waiting for them.
#pragma once

#include <string>
#include <vector>

namespace mgpu {

// The mgpu-worker next to the running executable, or $MGPU_WORKER if set.
std::string WorkerExecutable();

// The running executable (mgpu itself), for starting `mgpu run` from `mgpu compare`.
std::string LauncherExecutable();

// Runs `argv` with stdout/stderr inherited and waits. Returns the exit code, or 128 + signal.
// Throws mgpu::Error if the program cannot be started.
int RunAndWait(const std::vector<std::string>& argv);

// The last `count` non-empty lines of a process's output, oldest first, for failure reports.
std::vector<std::string> LastNonEmptyLines(const std::string& output, size_t count);

}  // namespace mgpu
