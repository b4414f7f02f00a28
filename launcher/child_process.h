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
// This process's first stop signal (common/stop_signal.h, whose handlers the caller installs) is
// passed on to the child once, as soon as it arrives: a signal sent to this process alone (kill
// PID, a scheduler) must not leave the child training on as an orphan. Where the signal reached
// the child too (Ctrl-C reaches the terminal's whole foreground group), the child gets it twice
// within kSameRequestWindow and counts one request.
// Throws mgpu::Error if the program cannot be started.
int RunAndWait(const std::vector<std::string>& argv);

// The last `count` non-empty lines of a process's output, oldest first, for failure reports.
std::vector<std::string> LastNonEmptyLines(const std::string& output, size_t count);

}  // namespace mgpu
