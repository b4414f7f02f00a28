#include "launcher/serve/client_commands.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "common/files.h"
#include "common/real.h"
#include "common/status.h"
#include "launcher/serve/serve_options.h"
#include "launcher/serve/status_line.h"
#include "launcher/serve/subcommand_args.h"
#include "launcher/serve/utf8_text.h"
#include "rpc/channel.h"
#include "rpc/server_security.h"
#include "service/job_service.grpc.pb.h"

namespace mgpu {
namespace {

constexpr auto kCallTimeout = std::chrono::seconds(10);
constexpr size_t kMaxConfigBytes = 256 * 1024;  // as the service accepts

struct Connection {
  std::string server;  // "": DefaultServerAddress()
  std::string token;
  std::string token_file;
  std::string token_on_command_line;  // refused
  std::string tls_ca;
};

void AddConnectionOptions(CLI::App& app, Connection& connection) {
  const char* server = std::getenv("MGPU_SERVER");
  if (server != nullptr) connection.server = server;
  app.add_option("--server", connection.server,
                 "the service: unix:PATH (its socket) or HOST:PORT [$MGPU_SERVER, else "
                 "unix:~/.local/state/mgpu/serve/serve.sock]");
  app.add_option("--token-file", connection.token_file,
                 "for a service over TCP: the file holding its shared secret [else $MGPU_TOKEN]");
  app.add_option("--token", connection.token_on_command_line, "refused: use --token-file or MGPU_TOKEN")->group("");
  app.add_option("--tls-ca", connection.tls_ca, "the CA certificate (PEM) to trust, for a service serving TLS");
}

// What a failed call means for the user, and the exit code.
int Report(const std::string& command, const Connection& connection, const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      std::fprintf(stderr,
                   "mgpu %s: cannot reach mgpu serve at %s (%s). Start one with `mgpu serve`, or point --server (or "
                   "MGPU_SERVER) at a running one\n",
                   command.c_str(), connection.server.c_str(), status.error_message().c_str());
      return static_cast<int>(ExitCode::kFailure);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      std::fprintf(stderr, "mgpu %s: %s\n", command.c_str(), status.error_message().c_str());
      return static_cast<int>(ExitCode::kBadInput);
    default:
      std::fprintf(stderr, "mgpu %s: the service at %s answered: %s\n", command.c_str(), connection.server.c_str(),
                   status.error_message().c_str());
      return static_cast<int>(ExitCode::kFailure);
  }
}

// Resolves the server's address and the token (throwing BadInputError for a token on the command
// line, a bad token file, or a malformed address) and opens a channel.
std::unique_ptr<service::JobService::Stub> Connect(const CLI::App& app, Connection& connection) {
  if (app.count("--token") > 0) throw BadInputError(TokenOnCommandLineMessage(app.get_name()));
  connection.token = LoadToken(connection.token_file, std::getenv("MGPU_TOKEN"));
  if (connection.server.empty()) connection.server = DefaultServerAddress();
  if (connection.server.rfind("unix:", 0) == 0) {
    if (connection.server.size() < 7 || connection.server[5] != '/') {
      throw BadInputError(fmt::format("--server {}: a socket is named unix:ABSOLUTE-PATH", connection.server));
    }
  } else {
    ParseHostPort(connection.server, "--server", 1);
  }
  return service::JobService::NewStub(MakeCoordinatorChannel(connection.server, connection.tls_ca));
}

void Prepare(grpc::ClientContext& context, const Connection& connection, bool streaming) {
  AddToken(context, connection.token);
  if (!streaming) context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
}

// A job id from the command line: a positive integer.
int64_t ParseJobId(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long id = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || id < 1) {
    throw BadInputError(fmt::format("'{}' is not a job id: ids are positive integers, as `mgpu submit` printed "
                                    "them (see mgpu status)",
                                    text));
  }
  return id;
}

const char* StateName(service::JobState state) {
  switch (state) {
    case service::QUEUED: return "queued";
    case service::RUNNING: return "running";
    case service::SUCCEEDED: return "succeeded";
    case service::FAILED: return "failed";
    case service::CANCELLED: return "cancelled";
    case service::INTERRUPTED: return "interrupted";
    default: return "unknown";
  }
}

std::string LocalTime(int64_t unix_ms, const char* format) {
  if (unix_ms <= 0) return "-";
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char text[64];
  std::strftime(text, sizeof(text), format, &local);
  return text;
}

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// Where the job is or how it ended, in one line.
std::string Outcome(const service::Job& job) {
  std::string line;
  if (job.state() == service::QUEUED) {
    line = job.queue_position() == 0 ? "next in queue" : fmt::format("{} job(s) ahead", job.queue_position());
  } else if (job.state() == service::SUCCEEDED && job.has_summary()) {
    const service::Summary& s = job.summary();
    line = fmt::format("accuracy {:.2f}% loss {:.4f}, {} steps in {:.1f} s, {:.0f} img/s", Real{s.test_accuracy()},
                       Real{s.test_loss()}, s.steps(), s.total_seconds(), s.images_per_second());
  } else if (job.has_progress()) {
    const service::Progress& p = job.progress();
    line = fmt::format("step {}{} (epoch {}/{}) loss {:.4f} {:.0f} img/s", p.step(),
                       p.max_steps() > 0 ? fmt::format("/{}", p.max_steps()) : "", p.epoch(), p.epochs(), Real{p.loss()},
                       p.images_per_second());
  } else if (job.state() == service::RUNNING) {
    line = "starting";
  }
  if (job.cancel_requested()) line += " [stopping]";
  if (job.state() != service::SUCCEEDED && !job.message().empty()) {
    line += (line.empty() ? "" : "; ") + FirstLine(job.message());
  }
  if (job.resumable()) line += fmt::format(" [resumable: mgpu submit --resume {}]", job.id());
  return line;
}

std::string Devices(const service::Job& job) {
  if (job.devices().empty()) return "-";
  return fmt::format("{}", fmt::join(job.devices(), ","));
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  static_cast<void>(google::protobuf::util::MessageToJsonString(message, &json, options));
  return json;
}

int SubmitCommand(const std::vector<std::string>& args) {
  Connection connection;
  std::string config;
  int gpus = 0, priority = 0;
  std::string resume;
  CLI::App app{"Submit a training job to mgpu serve; prints its id (the last line of stdout).\n"
               "CONFIG is a YAML file of mgpu-worker options (mgpu-worker --help), checked by the service before it\n"
               "queues the job: a refused job prints the reason and exits 2. Paths in it must be absolute.",
               "mgpu submit"};
  app.add_option("config", config, "the job's YAML configuration");
  app.add_option("--gpus", gpus, "devices the job needs [1; with --resume: the earlier job's]");
  app.add_option("--priority", priority, "higher runs first, -1000 to 1000 [0]");
  app.add_option("--resume", resume, "continue job ID (interrupted, cancelled or failed) from its last checkpoint, "
                                     "with its configuration");
  AddConnectionOptions(app, connection);
  if (const auto exit_code = ParseSubcommandArgs(app, args)) return *exit_code;
  service::SubmitRequest request;
  if (resume.empty()) {
    if (config.empty()) throw BadInputError("give the job's configuration file (mgpu submit CONFIG), or --resume ID");
    if (IsDirectory(config)) {
      throw BadInputError(fmt::format("{} is a folder; give the job's configuration file (a YAML file)", config));
    }
    const long long size = FileSize(config);
    if (size > static_cast<long long>(kMaxConfigBytes)) {
      throw BadInputError(fmt::format("{} is {} bytes; the service accepts configurations of at most {}", config, size,
                                      kMaxConfigBytes));
    }
    const std::string yaml = ReadFile(config);
    RequireUtf8(yaml, config);
    const std::string name = config.substr(config.rfind('/') == std::string::npos ? 0 : config.rfind('/') + 1);
    RequireUtf8(name, fmt::format("the file name of {}", config));
    request.set_config_yaml(yaml);
    request.set_config_name(name);
  } else {
    if (!config.empty()) {
      throw BadInputError("--resume continues the earlier job with its own configuration; leave CONFIG out");
    }
    request.set_resume_job_id(ParseJobId(resume));
  }
  request.set_gpus(gpus);
  request.set_priority(priority);
  auto stub = Connect(app, connection);
  grpc::ClientContext context;
  Prepare(context, connection, false);
  service::SubmitReply reply;
  const grpc::Status status = stub->Submit(&context, request, &reply);
  if (!status.ok()) return Report("submit", connection, status);
  std::fprintf(stderr, "mgpu submit: job %lld queued (%s)\n", static_cast<long long>(reply.job_id()),
               reply.queue_position() == 0 ? "next to start"
                                           : fmt::format("{} job(s) ahead", reply.queue_position()).c_str());
  std::printf("%lld\n", static_cast<long long>(reply.job_id()));
  return 0;
}

void PrintJob(const service::Job& job) {
  std::printf("job %lld: %s\n", static_cast<long long>(job.id()), StateName(job.state()));
  std::printf("  config      %s (%s on %s, mode %s)\n", job.config_name().c_str(), job.model().c_str(),
              job.dataset().c_str(), job.mode().c_str());
  std::printf("  devices     %d (slots %s), %d process(es), priority %d\n", job.gpus(), Devices(job).c_str(),
              job.world_size(), job.priority());
  std::printf("  submitted   %s\n", LocalTime(job.submitted_unix_ms(), "%Y-%m-%d %H:%M:%S").c_str());
  std::printf("  started     %s\n", LocalTime(job.started_unix_ms(), "%Y-%m-%d %H:%M:%S").c_str());
  std::printf("  ended       %s\n", LocalTime(job.ended_unix_ms(), "%Y-%m-%d %H:%M:%S").c_str());
  if (job.resumes_job_id() != 0) std::printf("  resumes     job %lld\n", static_cast<long long>(job.resumes_job_id()));
  const std::string outcome = Outcome(job);
  if (!outcome.empty()) std::printf("  %-11s %s\n", job.state() == service::SUCCEEDED ? "result" : "progress", outcome.c_str());
  if (!job.message().empty()) std::printf("  message     %s\n", job.message().c_str());
  if (job.has_exit_code()) std::printf("  exit code   %d\n", job.exit_code());
  if (job.state() != service::QUEUED) std::printf("  output      %s\n", job.run_folder().c_str());
}

int StatusCommand(const std::vector<std::string>& args) {
  Connection connection;
  std::string id;
  bool json = false;
  CLI::App app{"The jobs of mgpu serve: queued (in order), running (progress, throughput), ended (result).",
               "mgpu status"};
  app.add_option("id", id, "one job, in detail");
  app.add_flag("--json", json,
               "print JSON: the JobService messages in protobuf's JSON mapping (field names as in "
               "proto/service/job_service.proto, 64-bit numbers as strings)");
  AddConnectionOptions(app, connection);
  if (const auto exit_code = ParseSubcommandArgs(app, args)) return *exit_code;
  auto stub = Connect(app, connection);
  grpc::ClientContext context;
  Prepare(context, connection, false);
  if (!id.empty()) {
    service::GetJobRequest request;
    request.set_id(ParseJobId(id));
    service::Job job;
    const grpc::Status status = stub->GetJob(&context, request, &job);
    if (!status.ok()) return Report("status", connection, status);
    if (json) {
      std::printf("%s", ToJson(job).c_str());
    } else {
      PrintJob(job);
    }
    return 0;
  }
  service::ListJobsReply reply;
  const grpc::Status status = stub->ListJobs(&context, service::ListJobsRequest(), &reply);
  if (!status.ok()) return Report("status", connection, status);
  if (json) {
    std::printf("%s", ToJson(reply).c_str());
    return 0;
  }
  std::printf("devices: %s; free: %s\n", fmt::format("{}", fmt::join(reply.devices(), ",")).c_str(),
              reply.free_devices().empty() ? "none" : fmt::format("{}", fmt::join(reply.free_devices(), ",")).c_str());
  if (reply.jobs().empty()) {
    std::printf("no jobs yet (mgpu submit CONFIG)\n");
    return 0;
  }
  std::printf("%-5s %-11s %-4s %-5s %-7s %-14s %-20s %s\n", "ID", "STATE", "GPUS", "PRIO", "DEVICES", "SUBMITTED",
              "CONFIG", "PROGRESS / RESULT");
  for (const service::Job& job : reply.jobs()) {
    std::printf("%-5lld %-11s %-4d %-5d %-7s %-14s %-20s %s\n", static_cast<long long>(job.id()),
                StateName(job.state()), job.gpus(), job.priority(), Devices(job).c_str(),
                LocalTime(job.submitted_unix_ms(), "%m-%d %H:%M:%S").c_str(), job.config_name().substr(0, 20).c_str(),
                Outcome(job).c_str());
  }
  return 0;
}

int WatchCommand(const std::vector<std::string>& args) {
  Connection connection;
  std::string id;
  CLI::App app{"Follow one job of mgpu serve until it ends: one line kept up to date on a terminal, elsewhere\n"
               "a line each time its state or progress changes.\n"
               "Exits 0 when the job succeeded, 1 when it ended otherwise.",
               "mgpu watch"};
  app.add_option("id", id, "the job")->required();
  AddConnectionOptions(app, connection);
  if (const auto exit_code = ParseSubcommandArgs(app, args)) return *exit_code;
  service::WatchRequest request;
  request.set_id(ParseJobId(id));
  auto stub = Connect(app, connection);
  grpc::ClientContext context;
  Prepare(context, connection, true);
  auto reader = stub->Watch(&context, request);
  service::Job job;
  bool any = false;
  StatusLine line(::isatty(STDOUT_FILENO) == 1);
  while (reader->Read(&job)) {
    any = true;
    std::fputs(line.Show(fmt::format("{} job {} {}: {}", LocalTime(NowMillis(), "%H:%M:%S"), job.id(),
                                     StateName(job.state()), Outcome(job)))
                   .c_str(),
               stdout);
    std::fflush(stdout);
  }
  std::fputs(line.Finish().c_str(), stdout);
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return Report("watch", connection, status);
  return any && job.state() == service::SUCCEEDED ? 0 : static_cast<int>(ExitCode::kFailure);
}

int CancelCommand(const std::vector<std::string>& args) {
  Connection connection;
  std::string id;
  CLI::App app{"Stop a job of mgpu serve: a queued one is dropped; a running one gets SIGTERM (its workers stop\n"
               "cleanly), SIGKILL after the service's grace period, and its devices are free once it has ended.",
               "mgpu cancel"};
  app.add_option("id", id, "the job")->required();
  AddConnectionOptions(app, connection);
  if (const auto exit_code = ParseSubcommandArgs(app, args)) return *exit_code;
  service::CancelRequest request;
  request.set_id(ParseJobId(id));
  auto stub = Connect(app, connection);
  grpc::ClientContext context;
  Prepare(context, connection, false);
  service::CancelReply reply;
  const grpc::Status status = stub->Cancel(&context, request, &reply);
  if (!status.ok()) return Report("cancel", connection, status);
  if (reply.job().state() == service::CANCELLED) {
    std::printf("job %s cancelled before it started\n", id.c_str());
  } else {
    std::printf("job %s is stopping; its devices are free once its processes have ended (mgpu watch %s)\n", id.c_str(),
                id.c_str());
  }
  return 0;
}

int LogsCommand(const std::vector<std::string>& args) {
  Connection connection;
  std::string id;
  int rank = -1;
  bool follow = false;
  CLI::App app{"A job's console output: its `mgpu run` lines and rank 0's output, or one rank's with --rank.",
               "mgpu logs"};
  app.add_option("id", id, "the job")->required();
  app.add_option("--rank", rank, "one rank's console output (0 to the job's processes - 1)");
  app.add_flag("--follow,-f", follow, "keep printing new output until the job ends");
  AddConnectionOptions(app, connection);
  if (const auto exit_code = ParseSubcommandArgs(app, args)) return *exit_code;
  service::LogsRequest request;
  request.set_id(ParseJobId(id));
  if (app.count("--rank") > 0) request.set_rank(rank);
  request.set_follow(follow);
  auto stub = Connect(app, connection);
  grpc::ClientContext context;
  Prepare(context, connection, true);
  auto reader = stub->Logs(&context, request);
  service::LogChunk chunk;
  size_t bytes = 0;
  while (reader->Read(&chunk)) {
    bytes += chunk.data().size();
    std::fwrite(chunk.data().data(), 1, chunk.data().size(), stdout);
    std::fflush(stdout);
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return Report("logs", connection, status);
  if (bytes == 0) std::fprintf(stderr, "mgpu logs: no output yet for job %s\n", id.c_str());
  return 0;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& ClientCommands() {
  static const std::vector<std::pair<std::string, std::string>> commands = {
      {"submit", "submit a job to mgpu serve (mgpu submit CONFIG [--gpus N] [--priority P] | --resume ID)"},
      {"status", "the jobs of mgpu serve, or one in detail (mgpu status [ID] [--json])"},
      {"watch", "follow a job's progress until it ends (mgpu watch ID)"},
      {"cancel", "stop a job (mgpu cancel ID)"},
      {"logs", "a job's console output (mgpu logs ID [--rank K] [--follow])"},
  };
  return commands;
}

int ClientMain(const std::string& command, const std::vector<std::string>& args) {
  try {
    if (command == "submit") return SubmitCommand(args);
    if (command == "status") return StatusCommand(args);
    if (command == "watch") return WatchCommand(args);
    if (command == "cancel") return CancelCommand(args);
    if (command == "logs") return LogsCommand(args);
    throw BadInputError(fmt::format("unknown command '{}'", command));
  } catch (...) {
    const mgpu::Status status = StatusFromCurrentException();
    std::fprintf(stderr, "mgpu %s: %s\n", command.c_str(), status.ToString().c_str());
    return status.exit_code();
  }
}

}  // namespace mgpu
