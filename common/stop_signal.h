// A request to stop a run, from SIGINT, SIGTERM, SIGUSR1 (Slurm's warning before a time limit
// or preemption: `#SBATCH --signal=USR1@90`) or SIGHUP (the terminal or ssh session closed; also
// the kernel's hang-up of a stopped job whose shell was killed, POSIX's orphaned process group).
//
// SIGHUP ignored on entry stays ignored: `nohup` asked the run to outlive its terminal. Elsewhere
// a hang-up stops the run as SIGTERM does (torchrun handles it so too), with a checkpoint, instead
// of the default action that kills the process (and `mgpu run`'s workers, by their parent-death
// signal) with no summary.json and no checkpoint.
//
// The handlers only record the signal (an atomic and clock_gettime, both async-signal-safe); the
// training loop asks at each step boundary, stops there on every rank and writes a checkpoint
// (worker/stop_agreement.h). Handlers use SA_RESTART, so no system call of the loaders, the
// collectives or the logger fails with EINTR.
//
// A second SIGINT or SIGTERM ends the process at once with exit code 128 + N (the usual
// convention: a second Ctrl-C means "now"), unless it comes within kSameRequestWindow of the
// first: launchers and schedulers often deliver one request twice (Slurm signals every process
// of a job step, torchrun and `mgpu run` forward what they receive, a terminal's Ctrl-C reaches
// the whole foreground process group), and that must not cost the checkpoint. A repeated
// SIGUSR1 is only a reminder: it never forces.
#pragma once

#include <chrono>
#include <string>

namespace mgpu {

inline constexpr std::chrono::milliseconds kSameRequestWindow{1000};

// Installs the handlers for SIGINT, SIGTERM, SIGUSR1 and (unless ignored on entry) SIGHUP
// (sigaction). Idempotent.
void InstallStopSignalHandlers();

// The first stop signal this process received (SIGINT, SIGTERM, SIGUSR1 or SIGHUP), or 0. Cheap:
// one atomic load.
int ReceivedStopSignal();

// True where SIGHUP's action is SIG_IGN: `nohup` asked the process to outlive its terminal. Every
// stop handler of mgpu's programs leaves SIGHUP alone then (this file's, `mgpu serve`'s), so call
// it before installing one.
bool HangUpIsIgnored();

// "SIGTERM" for SIGTERM; "signal N" for a number without a name.
std::string SignalName(int signal);

}  // namespace mgpu
