#include "launcher/serve_command.h"

#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "common/files.h"
#include "common/status.h"
#include "launcher/job_manager.h"
#include "launcher/job_service.h"
#include "launcher/serve_options.h"
#include "launcher/state_dir_lock.h"
#include "launcher/subcommand_args.h"

namespace mgpu {
namespace {

std::atomic<int> stop_signal{0};
extern "C" void OnServeStopSignal(int signal) { stop_signal = signal; }

void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = OnServeStopSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

std::string AbsolutePath(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    throw Error(ExitCode::kFailure, fmt::format("cannot resolve the path {}", path));
  }
  return resolved;
}

const char* kServeHelp = R"(Owns this host's devices and runs submitted training jobs, one queue for everyone.

A job asks for a number of devices (mgpu submit --gpus N) and gets them exclusively; jobs that fit run
side by side. The queue is ordered by priority (higher first), then submission; the job at its head
starts as soon as enough devices are free, and nothing behind it starts first (no backfill: a large
job is never passed by a stream of small ones). Each job runs as `mgpu run` with its output in
<state-dir>/jobs/<id>/ (run/ holds summary.json, metrics.csv, logs/).

Devices (--gpus): GPU indices (0,1,3; a job sees its GPUs as CUDA_VISIBLE_DEVICES), CPU slots
(cpu,cpu), or by default every visible GPU, else 2 CPU slots. Without a visible GPU, indices name CPU
slots (--gpus 0,1 is two CPU slots).

State: jobs and their records are kept in <state-dir>/jobs.journal (fsync'd on every change), so a
restarted service lists every job; jobs that were running are marked interrupted and continue from
their last checkpoint with `mgpu submit --resume ID`. Jobs checkpoint every --checkpoint-every steps
unless their configuration says otherwise. One service per state folder.

Security: loopback only, unless --listen names another address, which needs --token (or MGPU_TOKEN;
clients pass the same) or TLS (--tls-cert/--tls-key; clients pass --tls-ca).

The address it listens on is also written to <state-dir>/address. SIGINT or SIGTERM stop it: running
jobs are stopped (recorded interrupted) and queued ones stay queued for the next start.)";

}  // namespace

int ServeMain(const std::vector<std::string>& args) {
  ServeOptions options;
  CLI::App app{kServeHelp, "mgpu serve"};
  app.get_formatter()->column_width(30);
  app.add_option("--listen", options.listen, "HOST:PORT to serve at (port 0: a free one)")->capture_default_str();
  app.add_option("--gpus", options.gpus, "the devices it owns: GPU indices or cpu slots (default: visible GPUs, else cpu,cpu)");
  app.add_option("--state-dir", options.state_dir, "where jobs and their outputs are kept [~/.local/state/mgpu/serve]");
  app.add_option("--token", options.token, "shared secret every call must carry")->envname("MGPU_TOKEN");
  app.add_option("--tls-cert", options.tls_cert, "serve over TLS with this certificate (PEM)");
  app.add_option("--tls-key", options.tls_key, "... and this key (PEM)");
  app.add_option("--checkpoint-every", options.checkpoint_every,
                 "checkpoint interval (steps) for jobs whose configuration sets none; 0: none")
      ->capture_default_str();
  app.add_option("--stop-grace", options.stop_grace_seconds,
                 "seconds from SIGTERM to SIGKILL when a job is cancelled or the service stops")
      ->capture_default_str();
  if (const auto exit_code = ParseSubcommandArgs(app, args)) return *exit_code;
  try {
    ValidateServeOptions(options);
    const HostPort listen = ParseHostPort(options.listen, "--listen", 0);
    const int visible_gpus = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
    const DeviceSlots slots = ParseDeviceSlots(options.gpus, visible_gpus);
    MakeDirectories(StateDirectory(options));
    const std::string state_dir = AbsolutePath(StateDirectory(options));
    StateDirLock lock(state_dir);

    ManagerOptions manager_options;
    manager_options.state_dir = state_dir;
    manager_options.slots = slots;
    manager_options.checkpoint_every = options.checkpoint_every;
    manager_options.stop_grace =
        std::chrono::milliseconds(static_cast<int64_t>(options.stop_grace_seconds * 1000));
    auto manager = std::make_unique<JobManager>(manager_options);
    for (const std::string& warning : manager->warnings()) std::fprintf(stderr, "mgpu serve: warning: %s\n", warning.c_str());
    auto server = std::make_unique<JobServer>(
        *manager, listen.host, listen.port, ServerSecurity{options.token, options.tls_cert, options.tls_key});
    WriteFileAtomically(state_dir + "/address", server->address() + "\n");
    InstallStopHandlers();
    std::fprintf(stderr, "mgpu serve: listening on %s%s; devices: %s (%s); state in %s\n", server->address().c_str(),
                 options.token.empty() ? "" : " (token required)",
                 fmt::format("{}", fmt::join(slots.names, ",")).c_str(), slots.cuda ? "GPUs" : "CPU slots",
                 state_dir.c_str());
    std::fprintf(stderr, "mgpu serve: clients: MGPU_SERVER=%s mgpu submit CONFIG | status | watch ID | cancel ID | logs ID\n",
                 server->address().c_str());
    while (stop_signal.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string why = fmt::format("mgpu serve was stopped ({})", stop_signal.load() == SIGINT ? "SIGINT" : "SIGTERM");
    std::fprintf(stderr, "mgpu serve: %s; stopping the running jobs\n", why.c_str());
    // Stop the jobs while still answering (status shows them stopping), then stop serving.
    manager->Stop(why);
    server.reset();
    manager.reset();
    std::fprintf(stderr, "mgpu serve: stopped\n");
    return 0;
  } catch (...) {
    const Status status = StatusFromCurrentException();
    std::fprintf(stderr, "mgpu serve: %s\n", status.ToString().c_str());
    return status.exit_code();
  }
}

}  // namespace mgpu
