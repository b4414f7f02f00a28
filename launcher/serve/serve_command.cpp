#include "launcher/serve/serve_command.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "common/stop_signal.h"
#include "launcher/cuda_devices.h"
#include "launcher/serve/job_manager.h"
#include "launcher/serve/job_paths.h"
#include "launcher/serve/job_service.h"
#include "launcher/serve/peer_socket.h"
#include "launcher/serve/serve_options.h"
#include "launcher/serve/state_dir_lock.h"
#include "launcher/serve/subcommand_args.h"

namespace mgpu {
namespace {

std::atomic<int> stop_signal{0};
extern "C" void OnServeStopSignal(int signal) { stop_signal = signal; }

// SIGHUP (a closed terminal) too, unless ignored on entry (nohup): its default action would kill
// the service, and its jobs with it by their parent-death signal, without their checkpoints.
void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = OnServeStopSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  if (!HangUpIsIgnored()) ::sigaction(SIGHUP, &action, nullptr);
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

Security (docs/MULTI_GPU.md: "Security model"): it listens on the Unix socket
<state-dir>/serve.sock, which only its own user and root can use (the state folder is made private,
mode 0700). --listen adds TCP, which needs a token (--token-file FILE or MGPU_TOKEN, never --token;
clients pass the same), and TLS (--tls-cert/--tls-key; clients pass --tls-ca) unless every address
of the host is loopback. Jobs run as the service's user, so it refuses to run as root unless
--allow-root. A job may read and write only in its own folder and the --allow-path folders, and read
the --allow-read folders; models load only from those allowed folders, and plugins (code run as the
service's user) only with --allow-plugins.

The addresses it listens on are also written to <state-dir>/address, one a line. SIGINT, SIGTERM or
SIGHUP (a closed terminal; not under nohup) stop it: running jobs are stopped (recorded interrupted)
and queued ones stay queued for the next start.)";

// The state folder made private: the socket, jobs' configurations and outputs are the user's.
void MakePrivate(const std::string& folder) {
  struct stat info {};
  if (::stat(folder.c_str(), &info) != 0 || info.st_uid != ::geteuid()) {
    throw BadInputError(fmt::format("--state-dir {}: the folder belongs to another user; give a folder of the "
                                    "service's own (it is made private, mode 0700)",
                                    folder));
  }
  if (::chmod(folder.c_str(), 0700) != 0) {
    throw Error(ExitCode::kFailure, fmt::format("cannot make {} private (chmod 700): {}", folder, std::strerror(errno)));
  }
}

PathPolicy AllowedFolders(const ServeOptions& options) {
  PathPolicy policy;
  for (const std::string& folder : options.allow_path) policy.read_write.push_back(AllowedFolder(folder, "--allow-path"));
  for (const std::string& folder : options.allow_read) policy.read_only.push_back(AllowedFolder(folder, "--allow-read"));
  policy.plugins = options.allow_plugins;
  return policy;
}

// The socket admits the service's own user and root; TCP, when asked for, takes the token.
JobEndpoints Endpoints(const ServeOptions& options, const HostPort& listen, const std::string& state_dir) {
  JobEndpoints endpoints;
  endpoints.socket_path = SocketPath(state_dir);
  endpoints.socket_uids = {::geteuid()};
  if (::geteuid() != 0) endpoints.socket_uids.push_back(0);
  endpoints.tcp_host = listen.host;
  endpoints.tcp_port = listen.port;
  endpoints.security = ServerSecurity{options.token, options.tls_cert, options.tls_key};
  return endpoints;
}

}  // namespace

int ServeMain(const std::vector<std::string>& args) {
  ServeOptions options;
  CLI::App app{kServeHelp, "mgpu serve"};
  app.get_formatter()->column_width(30);
  std::string token_on_command_line;
  app.add_option("--listen", options.listen, "HOST:PORT to serve TCP at as well as the socket (port 0: a free one)");
  app.add_option("--gpus", options.gpus, "the devices it owns: GPU indices or cpu slots (default: visible GPUs, else cpu,cpu)");
  app.add_option("--state-dir", options.state_dir, "where jobs and their outputs are kept [~/.local/state/mgpu/serve]");
  app.add_option("--token-file", options.token_file, "with --listen: the file holding the shared secret every TCP call "
                 "must carry [else $MGPU_TOKEN]");
  app.add_option("--token", token_on_command_line, "refused: use --token-file or MGPU_TOKEN")->group("");
  app.add_option("--tls-cert", options.tls_cert, "serve over TLS with this certificate (PEM)");
  app.add_option("--tls-key", options.tls_key, "... and this key (PEM)");
  app.add_option("--allow-path", options.allow_path, "a folder jobs may read and write (repeatable)");
  app.add_option("--allow-read", options.allow_read, "a folder jobs may read: data sets, models (repeatable)");
  app.add_flag("--allow-plugins", options.allow_plugins,
               "let jobs load plugin models (plugin:LIB.so:NAME, from allowed folders): their code runs as this "
               "service's user");
  app.add_flag("--allow-root", options.allow_root, "run as root (then every job runs as root)");
  app.add_option("--checkpoint-every", options.checkpoint_every,
                 "checkpoint interval (steps) for jobs whose configuration sets none; 0: none")
      ->capture_default_str();
  app.add_option("--stop-grace", options.stop_grace_seconds,
                 "seconds from SIGTERM to SIGKILL when a job is cancelled or the service stops")
      ->capture_default_str();
  if (const auto exit_code = ParseSubcommandArgs(app, args)) return *exit_code;
  try {
    if (app.count("--token") > 0) throw BadInputError(TokenOnCommandLineMessage("mgpu serve"));
    options.token = LoadToken(options.token_file, options.listen.empty() ? nullptr : std::getenv("MGPU_TOKEN"));
    ValidateServeOptions(options);
    CheckServiceUser(options, ::geteuid());
    const HostPort listen = options.listen.empty() ? HostPort() : ParseHostPort(options.listen, "--listen", 0);
    const int visible_gpus = VisibleCudaDevices();
    const DeviceSlots slots = ParseDeviceSlots(options.gpus, visible_gpus);
    MakeDirectories(StateDirectory(options));
    const std::string state_dir = AbsolutePath(StateDirectory(options));
    StateDirLock lock(state_dir);
    MakePrivate(state_dir);

    ManagerOptions manager_options;
    manager_options.state_dir = state_dir;
    manager_options.slots = slots;
    manager_options.checkpoint_every = options.checkpoint_every;
    manager_options.stop_grace =
        std::chrono::milliseconds(static_cast<int64_t>(options.stop_grace_seconds * 1000));
    manager_options.paths = AllowedFolders(options);
    auto manager = std::make_unique<JobManager>(manager_options);
    for (const std::string& warning : manager->warnings()) std::fprintf(stderr, "mgpu serve: warning: %s\n", warning.c_str());
    auto server = std::make_unique<JobServer>(*manager, Endpoints(options, listen, state_dir));
    const std::string tcp = server->tcp_address();
    WriteFileAtomically(state_dir + "/address", server->socket_address() + "\n" + (tcp.empty() ? "" : tcp + "\n"));
    InstallStopHandlers();
    std::fprintf(stderr, "mgpu serve: listening on %s%s; devices: %s (%s); state in %s\n",
                 server->socket_address().c_str(),
                 tcp.empty() ? "" : fmt::format(" and {} (token required{})", tcp, options.tls_cert.empty() ? "" : ", TLS").c_str(),
                 fmt::format("{}", fmt::join(slots.names, ",")).c_str(), slots.cuda ? "GPUs" : "CPU slots",
                 state_dir.c_str());
    std::fprintf(stderr, "mgpu serve: clients: MGPU_SERVER=%s mgpu submit CONFIG | status | watch ID | cancel ID | logs ID\n",
                 server->socket_address().c_str());
    while (stop_signal.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string why = fmt::format("mgpu serve was stopped ({})", SignalName(stop_signal.load()));
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
