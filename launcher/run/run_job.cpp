#include "launcher/run/run_job.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "common/files.h"
#include "common/status.h"
#include "common/stop_signal.h"
#include "config/command_line.h"
#include "coordinator/coordinator.grpc.pb.h"
#include "launcher/child_process.h"
#include "launcher/cuda_devices.h"
#include "launcher/net.h"
#include "launcher/run/coordinator_server.h"
#include "launcher/run/job_state.h"
#include "launcher/run/job_summary.h"
#include "launcher/run/root_cause.h"
#include "launcher/run/stall_report.h"
#include "launcher/run/worker_group.h"
#include "rpc/channel.h"

extern char** environ;

namespace mgpu {
namespace {

constexpr auto kStopGrace = std::chrono::milliseconds(3000);
// From forwarding SIGINT/SIGTERM/SIGUSR1/SIGHUP to SIGKILL: the workers finish their step and write a
// checkpoint in it (docs/GUIDE.md, "Stopping a run"). Slurm's default KillWait is as long.
constexpr auto kInterruptGrace = std::chrono::milliseconds(30000);
constexpr auto kPollInterval = std::chrono::milliseconds(50);

// The launcher's signals are the worker's (common/stop_signal.h): the first is forwarded to the
// workers; a second SIGINT/SIGTERM/SIGHUP ends the launcher at once, and its workers with it (their
// parent-death signal).
void InstallStopHandlers() { InstallStopSignalHandlers(); }

// Forwards the launcher's stop signal to every worker, which stops at its next step boundary with
// a checkpoint and exits 128 + signal; SIGKILL for those still running after kInterruptGrace.
void StopAfterInterrupt(WorkerGroup& group, int signal) {
  std::fprintf(stderr, "mgpu run: %s sent to the workers; they stop after their current step and write a checkpoint "
               "(SIGKILL after %lld s)\n", SignalName(signal).c_str(),
               static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kInterruptGrace).count()));
  group.Stop(kInterruptGrace, signal);
}

// What every node's launcher works out before it starts a worker.
struct JobPlan {
  TrainConfig config;
  int nproc = 1;
  int world_size = 1;
  std::string worker_program;
  std::vector<std::string> worker_args;  // the user's worker flags
  int master_port = 0;
  int coordinator_port = 0;
  int heartbeat_interval_ms = 1000;
};

JobPlan MakePlan(const RunOptions& options) {
  JobPlan plan;
  plan.config = ParseJobWorkerConfig(options.worker_args);
  if (options.nproc_per_node == "auto") {
    const int gpus = plan.config.device != "cpu" ? VisibleCudaDevices() : 0;
    plan.nproc = gpus > 0 ? gpus : 2;
  } else {
    plan.nproc = std::stoi(options.nproc_per_node);
  }
  plan.world_size = plan.nproc * options.nnodes;
  if (plan.world_size > 1 && plan.config.mode != Mode::kDdp) {
    throw BadInputError(fmt::format("mgpu run starts {} workers, which train together only with --mode ddp; pass "
                                    "--mode ddp, or --nproc-per-node 1 for one process (the mode is not inferred: "
                                    "--mode {} asks for one process, and --nproc-per-node auto starts one per GPU)",
                                    plan.world_size, plan.config.mode));
  }
  plan.worker_program = WorkerExecutable();
  plan.worker_args = options.worker_args;
  const bool one_node = options.nnodes == 1;
  plan.master_port = options.master_port > 0 ? options.master_port : (one_node ? FreeTcpPort(options.master_addr) : 29500);
  plan.coordinator_port = options.coordinator_port > 0 ? options.coordinator_port : (one_node ? 0 : plan.master_port + 1);
  plan.heartbeat_interval_ms =
      std::clamp(static_cast<int>(options.heartbeat_timeout * 1000 / 4), 50, 1000);
  return plan;
}

// Intra-op threads per worker when the user set none: this node's cores shared among its
// workers (torchrun sets 1). Otherwise each of N workers starts a pool of every core, and on a
// small CPU machine their OpenMP threads spin against each other (LeNet DDP on 2 cores: 7x slower).
std::string OmpThreadsPerWorker(int nproc) {
  if (const char* set = std::getenv("OMP_NUM_THREADS"); set != nullptr && *set != '\0') return set;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::to_string(std::max(1u, cores / static_cast<unsigned>(std::max(1, nproc))));
}

// The environment of one worker: this process's, with the launcher's variables set.
std::vector<std::string> WorkerEnvironment(const RunOptions& options, const JobPlan& plan, int rank, int local_rank,
                                           const std::string& coordinator) {
  const std::vector<std::pair<std::string, std::string>> set = {
      {"OMP_NUM_THREADS", OmpThreadsPerWorker(plan.nproc)},
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"GROUP_RANK", std::to_string(options.node_rank)},
      {"WORLD_SIZE", std::to_string(plan.world_size)},
      {"LOCAL_WORLD_SIZE", std::to_string(plan.nproc)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(plan.master_port)},
      {"MGPU_COORDINATOR", coordinator},
      {"MGPU_TOKEN", options.token},
      {"MGPU_TLS_CA", options.tls_ca},
  };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    // Open MPI's variables would make a worker think mpirun started it.
    if (name.rfind("OMPI_COMM_WORLD_", 0) == 0) continue;
    if (std::none_of(set.begin(), set.end(), [&](const auto& kv) { return kv.first == name; })) env.push_back(entry);
  }
  for (const auto& [name, value] : set) {
    if (!value.empty()) env.push_back(name + "=" + value);
  }
  return env;
}

std::vector<WorkerSpec> WorkerSpecs(const RunOptions& options, const JobPlan& plan, const std::string& out,
                                    const std::string& log_dir, const std::string& coordinator, bool resume) {
  std::vector<std::string> argv = {plan.worker_program};
  argv.insert(argv.end(), plan.worker_args.begin(), plan.worker_args.end());
  argv.insert(argv.end(), {"--out", out});
  // A pipe is not a terminal, so the worker would print plain lines; the bar is wanted when
  // rank 0's output goes straight to the launcher's terminal.
  if (!options.tee && plan.config.progress == "auto" && ::isatty(STDERR_FILENO)) argv.insert(argv.end(), {"--progress", "bar"});
  const std::string checkpoint = out + "/checkpoints/latest.ckpt";
  if (resume && IsRegularFile(checkpoint)) {
    argv.insert(argv.end(), {"--resume", checkpoint});
  } else if (resume && !plan.config.overwrite) {
    argv.push_back("--overwrite");  // a restart without a checkpoint starts over the failed attempt's folder
  }
  std::vector<WorkerSpec> specs;
  for (int local = 0; local < plan.nproc; ++local) {
    WorkerSpec spec;
    spec.rank = options.node_rank * plan.nproc + local;
    spec.argv = argv;
    spec.environment = WorkerEnvironment(options, plan, spec.rank, local, coordinator);
    spec.console_log = fmt::format("{}/rank-{}.console.log", log_dir, spec.rank);
    spec.to_terminal = options.tee || spec.rank == 0;
    spec.prefix_lines = options.tee;
    specs.push_back(spec);
  }
  return specs;
}

// The last few non-empty lines of a log tail, for a one-screen report.
std::string LastLines(const std::string& text, size_t count) {
  std::string joined;
  for (const auto& line : LastNonEmptyLines(text, count)) joined += (joined.empty() ? "" : "\n    ") + line;
  return joined;
}

// The failure report of `view`, a rank that failed (FailureOf(view) is set).
JobFailure FailureReport(const RankView& view) {
  const bool failed_exit = view.exited && (view.exit.exit_code() != 0 || view.exit.signal() != 0);
  const bool failed_finish = view.finished && view.finish.exit_code() != 0;
  JobFailure f;
  f.kind = "failed";
  f.rank = view.rank;
  f.host = view.host;
  f.pid = view.pid;
  f.step = view.step;
  f.epoch = view.epoch;
  f.phase = view.phase;
  f.unix_millis = FailureOf(view)->unix_millis;
  std::string how;
  if (failed_exit && view.exit.signal() != 0) {
    f.signal = view.exit.signal();
    f.exit_code = 128 + f.signal;
    how = fmt::format("was killed by signal {} ({})", f.signal, SignalName(f.signal));
  } else {
    f.exit_code = failed_finish ? view.finish.exit_code() : view.exit.exit_code();
    how = fmt::format("exited with code {}", f.exit_code);
  }
  f.reported_error = failed_finish && !view.finish.error().empty();
  f.error = f.reported_error ? view.finish.error() : LastLines(view.exit.log_tail(), 5);
  f.message = fmt::format("rank {} ({}{}) {} at {}", f.rank, f.host.empty() ? "host unknown" : "host " + f.host,
                          f.pid > 0 ? fmt::format(", pid {}", f.pid) : "", how, RankPosition(view, SteadyClock::now()));
  return f;
}

JobFailure Interrupted(int signal) {
  JobFailure f;
  f.kind = "interrupted";
  f.signal = signal;
  f.exit_code = 128 + signal;
  f.unix_millis = UnixMillis();
  f.message = fmt::format("mgpu run was interrupted by {}", SignalName(signal));
  return f;
}

void PrintFailure(const JobFailure& f) {
  std::fprintf(stderr, "mgpu run: %s\n", f.message.c_str());
  if (f.error.empty()) return;
  const char* label = f.kind == "hung" ? "" : f.reported_error ? "its error: " : "its last output:\n    ";
  std::fprintf(stderr, "mgpu run: %s%s\n", label, f.error.c_str());
}

// Two missed node reports (at most 1 s apart), shorter than kSettleWindow: a node silent this long
// when a peer-lost failure is blamed has gone.
constexpr double kMissedReportsSeconds = 2;

// Supervises one attempt on node 0 until it succeeds or fails.
std::optional<JobFailure> SuperviseAttempt(const JobState& state, const RunOptions& options, int nproc,
                                           const std::string& log_dir, const std::string& coordinator) {
  const auto started = SteadyClock::now();
  std::optional<SteadyClock::time_point> first_failure_seen;
  while (true) {
    std::this_thread::sleep_for(kPollInterval);
    if (const int signal = ReceivedStopSignal(); signal != 0) return Interrupted(signal);
    const std::vector<RankView> ranks = state.Ranks();
    if (const std::optional<int> cause = RootCauseRank(ranks)) {
      // The ranks that saw a peer vanish may report before the launcher sees the peer end: wait
      // for every fate, within the settle window, then blame by the rule (launcher/run/root_cause.h).
      if (!first_failure_seen) first_failure_seen = SteadyClock::now();
      if (EveryFateKnown(ranks) || SteadyClock::now() - *first_failure_seen >= kSettleWindow) {
        const RankView& blamed = ranks.at(static_cast<size_t>(*cause));
        // The blamed rank only saw a peer vanish while a node has missed its reports: that node's
        // host went down or its mgpu run was killed (a killed container resets its connections at
        // once, long before the heartbeat timeout), and its ranks' ends will never arrive.
        if (FailureOf(blamed)->failure_class == FailureClass::kPeerLost) {
          if (auto lost = LostNode(state.Nodes(), ranks, nproc, kMissedReportsSeconds, options.heartbeat_timeout,
                                   SteadyClock::now())) {
            return lost;
          }
        }
        return FailureReport(blamed);
      }
      continue;
    }
    if (std::all_of(ranks.begin(), ranks.end(), [](const RankView& r) { return r.exited; })) return std::nullopt;
    const double timeout = options.heartbeat_timeout;
    const auto now = SteadyClock::now();
    if (auto lost = LostNode(state.Nodes(), ranks, nproc, timeout, timeout, now)) return lost;
    if (auto absent = AbsentNodes(state.Nodes(), ranks, nproc, timeout, started, now, coordinator)) return absent;
    if (auto hung = HungRanks(ranks, timeout, started, now, log_dir)) {
      // The ranks that wait for a lost node's in a collective stall as early as its own do; a
      // node silent for half the timeout (two missed reports at least) is then the cause.
      if (auto lost = LostNode(state.Nodes(), ranks, nproc, timeout / 2, timeout, now)) return lost;
      return hung;
    }
  }
}

int RunCoordinatorNode(const RunOptions& options, const JobPlan& plan) {
  const TrainConfig& config = plan.config;
  const std::string out = config.out.empty() ? DefaultOutputFolder(config) : config.out;
  const std::string log_dir = options.log_dir.empty() ? out + "/logs" : options.log_dir;
  MakeDirectories(out);
  MakeDirectories(log_dir);
  CheckPortFree(options.master_addr, plan.master_port, "--master-port");

  coordinator::Assignment assignment;
  assignment.set_world_size(plan.world_size);
  assignment.set_local_world_size(plan.nproc);
  assignment.set_run_folder(out);
  for (const auto& arg : plan.worker_args) assignment.add_worker_args(arg);
  assignment.set_master_addr(options.master_addr);
  assignment.set_master_port(plan.master_port);
  assignment.set_heartbeat_interval_ms(plan.heartbeat_interval_ms);
  assignment.set_heartbeat_timeout_ms(static_cast<int32_t>(std::clamp(options.heartbeat_timeout * 1000, 1.0, 2e9)));
  JobState state(plan.world_size, plan.nproc, assignment);
  const std::string listen_host = options.nnodes == 1 ? "127.0.0.1" : options.master_addr;
  CoordinatorServer server(state, listen_host, plan.coordinator_port,
                           ServerSecurity{options.token, options.tls_cert, options.tls_key});
  std::fprintf(stderr, "mgpu run: %d worker(s)%s, coordinator at %s, rendezvous at %s:%d, output in %s\n",
               plan.world_size, options.nnodes > 1 ? fmt::format(" on {} nodes", options.nnodes).c_str() : "",
               server.address().c_str(), options.master_addr.c_str(), plan.master_port, out.c_str());
  InstallStopHandlers();

  const auto job_start = SteadyClock::now();
  JobReport report;
  report.nnodes = options.nnodes;
  report.nproc_per_node = plan.nproc;
  report.coordinator = server.address();
  for (int attempt = 0;; ++attempt) {
    state.StartAttempt(attempt);
    RemovePath(out + "/summary.json");  // a failed attempt must not leave an older run's summary
    report.attempts = attempt + 1;
    {
      WorkerGroup group([&state](const coordinator::WorkerExit& exit) { state.RecordExit(exit); });
      group.Start(WorkerSpecs(options, plan, out, log_dir, server.address(), attempt > 0));
      report.failure = SuperviseAttempt(state, options, plan.nproc, log_dir, server.address());
      if (report.failure) PrintFailure(*report.failure);
      if (report.failure && report.failure->kind == "interrupted") {
        StopAfterInterrupt(group, report.failure->signal);
      } else {
        if (report.failure) std::fprintf(stderr, "mgpu run: stopping the other workers\n");
        group.Stop(kStopGrace);
      }
    }
    if (!report.failure || report.failure->kind == "interrupted" || attempt >= options.max_restarts) break;
    std::fprintf(stderr, "mgpu run: restarting the whole group (restart %d of %d)%s\n", attempt + 1,
                 options.max_restarts,
                 IsRegularFile(out + "/checkpoints/latest.ckpt") ? " from checkpoints/latest.ckpt" : "");
  }
  const int exit_code = report.failure ? report.failure->exit_code : 0;
  state.EndJob(exit_code, report.failure ? report.failure->message : "");
  // The other nodes learn the end from their next NodeReport; give them a few intervals.
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(4 * plan.heartbeat_interval_ms) + kStopGrace;
  const auto max_silence = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(options.heartbeat_timeout));
  while (!state.NodesToldToStop(max_silence) && SteadyClock::now() < deadline) std::this_thread::sleep_for(kPollInterval);
  report.seconds = SecondsBetween(job_start, SteadyClock::now());
  WriteJobSummary(out, config, plan.world_size, report, state.Ranks());
  if (exit_code == 0) {
    std::fprintf(stderr, "mgpu run: all %d rank(s) finished; summary in %s/summary.json\n", plan.world_size, out.c_str());
  } else if (report.failure->kind == "interrupted" && IsRegularFile(out + "/checkpoints/latest.ckpt")) {
    std::fprintf(stderr, "mgpu run: job interrupted (exit code %d); resume it with --resume %s\n", exit_code, out.c_str());
  } else {
    std::fprintf(stderr, "mgpu run: job failed with exit code %d; see %s/summary.json and %s/\n", exit_code,
                 out.c_str(), log_dir.c_str());
  }
  return exit_code;
}

// A node other than 0: joins node 0's coordinator, runs its workers, relays their exits.
int RunMemberNode(const RunOptions& options, const JobPlan& plan) {
  const std::string coordinator_address = fmt::format("{}:{}", options.master_addr, plan.coordinator_port);
  auto stub = coordinator::Coordinator::NewStub(MakeCoordinatorChannel(coordinator_address, options.tls_ca));
  coordinator::JoinNodeRequest join;
  join.set_node_rank(options.node_rank);
  join.set_host(HostName());
  join.set_nproc_per_node(plan.nproc);
  join.set_pid(::getpid());
  coordinator::JoinNodeReply joined;
  {
    grpc::ClientContext context;
    AddToken(context, options.token);
    context.set_wait_for_ready(true);  // node 0 may start later
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(options.heartbeat_timeout * 1000)));
    const grpc::Status status = stub->JoinNode(&context, join, &joined);
    if (!status.ok()) {
      throw Error(status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? ExitCode::kFailure : ExitCode::kBadInput,
                  fmt::format("node {} cannot join the coordinator at {} (node 0's mgpu run, --master-addr and "
                              "--coordinator-port): {}",
                              options.node_rank, coordinator_address, status.error_message()));
    }
  }
  const std::string out = joined.run_folder();
  const std::string log_dir = options.log_dir.empty() ? out + "/logs" : options.log_dir;
  MakeDirectories(log_dir);
  std::fprintf(stderr, "mgpu run: node %d joined the coordinator at %s; %d worker(s), output in %s\n",
               options.node_rank, coordinator_address.c_str(), plan.nproc, out.c_str());
  InstallStopHandlers();

  std::mutex mutex;
  std::vector<coordinator::WorkerExit> exits;  // not yet reported
  WorkerGroup group([&](const coordinator::WorkerExit& exit) {
    std::lock_guard<std::mutex> lock(mutex);
    exits.push_back(exit);
  });
  group.Start(WorkerSpecs(options, plan, out, log_dir, coordinator_address, false));
  auto last_contact = SteadyClock::now();
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(joined.report_interval_ms()));
    coordinator::NodeReportRequest request;
    request.set_node_rank(options.node_rank);
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& exit : exits) *request.add_exits() = exit;
    }
    grpc::ClientContext context;
    AddToken(context, options.token);
    // A report must not outlast the time left before node 0 counts as lost, so an unreachable
    // node 0 is noticed within --heartbeat-timeout (plus one interval).
    const double left_ms = options.heartbeat_timeout * 1000 - SecondsBetween(last_contact, SteadyClock::now()) * 1000;
    const int64_t deadline_ms = std::clamp<int64_t>(static_cast<int64_t>(left_ms), joined.report_interval_ms(),
                                                    4 * static_cast<int64_t>(joined.report_interval_ms()));
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
    coordinator::NodeReportReply reply;
    const grpc::Status status = stub->NodeReport(&context, request, &reply);
    if (status.ok()) {
      last_contact = SteadyClock::now();
      std::lock_guard<std::mutex> lock(mutex);
      exits.erase(exits.begin(), exits.begin() + request.exits_size());
    }
    if (const int signal = ReceivedStopSignal(); signal != 0) {
      std::fprintf(stderr, "mgpu run: node %d interrupted by %s\n", options.node_rank, SignalName(signal).c_str());
      StopAfterInterrupt(group, signal);
      return 128 + signal;
    }
    if (status.ok() && reply.stop()) {
      if (reply.exit_code() != 0) std::fprintf(stderr, "mgpu run: node 0 stopped the job: %s\n", reply.reason().c_str());
      group.Stop(kStopGrace);
      return reply.exit_code();
    }
    if (SecondsBetween(last_contact, SteadyClock::now()) > options.heartbeat_timeout) {
      std::fprintf(stderr,
                   "mgpu run: node %d lost node 0 (the coordinator at %s): no answer for more than %g s "
                   "(--heartbeat-timeout; last error: %s); stopping its workers\n",
                   options.node_rank, coordinator_address.c_str(), options.heartbeat_timeout,
                   status.error_message().c_str());
      group.Stop(kStopGrace);
      return static_cast<int>(ExitCode::kFailure);
    }
  }
}

}  // namespace

TrainConfig ParseJobWorkerConfig(const std::vector<std::string>& worker_args) {
  int help_exit = 0;
  std::optional<TrainConfig> config = ParseWorkerCommandLine(worker_args, help_exit);
  if (!config) throw BadInputError("worker flags: --help is not a worker flag under mgpu run; see `mgpu run --help`");
  for (const auto& [value, name] : {std::pair{config->rank, "rank"}, std::pair{config->world_size, "world-size"},
                                    std::pair{config->local_rank, "local-rank"}}) {
    if (value != -1) {
      throw BadInputError(fmt::format("'{}' is set by mgpu run for each worker; remove it from {}", name,
                                      config->config_file.empty() ? "the flags" : config->config_file));
    }
  }
  if (!config->master_addr.empty() || config->master_port != -1) {
    throw BadInputError(fmt::format("master-addr/master-port in {} are mgpu run's flags; give them to mgpu run",
                                    config->config_file.empty() ? "the worker flags" : config->config_file));
  }
  return *config;
}

int RunJob(const RunOptions& options) {
  const JobPlan plan = MakePlan(options);
  return options.node_rank == 0 ? RunCoordinatorNode(options, plan) : RunMemberNode(options, plan);
}

}  // namespace mgpu
