// `mgpu serve` end to end on 2 CPU slots: jobs run in queue order (priority, then submission),
// side by side when they fit and exclusively on their devices; cancel stops a running job and
// frees its devices within 5 s with no worker left; a service killed with SIGKILL and restarted
// lists every job, the running one interrupted and resumable from its checkpoint; 200 malformed
// or hostile requests leave it up and answering; it serves TLS. Its security model holds against
// the attacks of issue 34: a private Unix socket by default, TCP only with a token (never on the
// command line) and TLS unless loopback after resolution, no root without --allow-root, job paths
// confined, plugins refused before any of their code runs. The job states are read over the
// JobService; submit, cancel and status go through the `mgpu` clients.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <random>
#include <regex>
#include <stdexcept>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "rpc/channel.h"
#include "service/job_service.grpc.pb.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;
using Clock = std::chrono::steady_clock;

// Gone, or a zombie waiting for init to reap it: either way it runs no more.
bool ProcessGone(pid_t pid) {
  const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  const size_t name_end = stat.rfind(')');
  return stat.empty() || name_end == std::string::npos || stat.compare(name_end + 1, 3, " Z ") == 0;
}

// The pids the workers of a run folder logged at start ("mgpu-worker started (pid N)").
std::vector<pid_t> WorkerPids(const std::string& run_folder, int world_size) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world_size; ++rank) {
    std::smatch match;
    const std::string log = ReadText(run_folder + "/logs/rank-" + std::to_string(rank) + ".log");
    if (std::regex_search(log, match, std::regex(R"(mgpu-worker started \(pid (\d+)\))"))) {
      pids.push_back(static_cast<pid_t>(std::stol(match[1])));
    }
  }
  return pids;
}

// `mgpu serve` refuses root unless told (jobs would run as root); the tests may run as root.
std::vector<std::string> RootFlag() { return ::geteuid() == 0 ? std::vector<std::string>{"--allow-root"} : std::vector<std::string>{}; }

// One `mgpu serve` on 2 CPU slots over `state`, its output in <state>.log. Its clients dial its
// TCP address when `flags` give --listen, else its Unix socket.
class Service {
 public:
  Service(const std::string& state, std::vector<std::string> flags = {}, const std::vector<std::string>& env = {})
      : state_(state) {
    MakeDirectories(state);
    RemovePath(state + "/address");  // written anew once this service listens
    std::string command = std::string("exec ") + MGPU_LAUNCHER_BIN + " serve --gpus cpu,cpu --state-dir " + state;
    for (const std::string& flag : RootFlag()) flags.push_back(flag);
    for (const std::string& flag : flags) command += " " + flag;
    command += " >> " + state + ".log 2>&1";
    process_ = std::make_unique<BackgroundCommand>(std::vector<std::string>{"/bin/sh", "-c", command}, env);
    if (!WaitFor([&] { return IsRegularFile(state + "/address"); }, 30)) {
      throw std::runtime_error("mgpu serve did not start:\n" + ReadText(state + ".log"));
    }
    const std::string addresses = ReadText(state + "/address");  // the socket's, then TCP's if any
    const size_t first_end = addresses.find('\n');
    socket_address_ = addresses.substr(0, first_end);
    address_ = addresses.size() > first_end + 1 ? addresses.substr(first_end + 1, addresses.size() - first_end - 2)
                                                : socket_address_;
    pid_ = static_cast<pid_t>(std::stol(ReadText(state + "/serve.lock")));
    stub_ = service::JobService::NewStub(MakeCoordinatorChannel(address_, ""));
  }
  ~Service() {
    if (process_) Stop(SIGTERM);
  }

  // Sends `signal` and waits for the service to exit; returns its exit code.
  int Stop(int signal) {
    ::kill(pid_, signal);
    const int code = process_->Wait().exit_code;
    process_.reset();
    return code;
  }

  // `mgpu COMMAND ARGS --server <this service>`, with `env` added to the environment.
  CommandResult Mgpu(const std::string& command, std::vector<std::string> args,
                     const std::vector<std::string>& env = {}) const {
    args.insert(args.begin(), {MGPU_LAUNCHER_BIN, command});
    args.insert(args.end(), {"--server", address_});
    return RunCommand(args, env);
  }

  service::Job Job(int64_t id, const std::string& token = "") const {
    grpc::ClientContext context;
    AddToken(context, token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    service::GetJobRequest request;
    request.set_id(id);
    service::Job job;
    const grpc::Status status = stub_->GetJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << "job " << id << ": " << status.error_message();
    return job;
  }
  grpc::Status List(service::ListJobsReply* reply, const std::string& token = "") const {
    grpc::ClientContext context;
    AddToken(context, token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ListJobs(&context, service::ListJobsRequest(), reply);
  }
  bool WaitForState(int64_t id, service::JobState state, double seconds) const {
    return WaitFor([&] { return Job(id).state() == state; }, seconds);
  }

  const std::string& address() const { return address_; }
  const std::string& socket_address() const { return socket_address_; }
  pid_t pid() const { return pid_; }
  service::JobService::Stub& stub() { return *stub_; }

 private:
  std::string state_;
  std::unique_ptr<BackgroundCommand> process_;
  std::string address_;
  std::string socket_address_;
  pid_t pid_ = -1;
  std::unique_ptr<service::JobService::Stub> stub_;
};

class ServeCli : public ::testing::Test {
 protected:
  // 640 training images in batches of 32: 20 steps per epoch.
  static void SetUpTestSuite() {
    data_ = new TempDir();
    WriteTinyMnistLike(data_->path(), 640, 200);
  }
  static void TearDownTestSuite() { delete data_; }

  // A job configuration file in dir_: LeNet on the tiny data, one CPU thread per process.
  std::string Config(const std::string& name, const std::string& extra) {
    const std::string path = dir_ / name;
    WriteBytes(path, "data-dir: " + data_->path() + "\ndevice: cpu\nthreads: 1\nbatch-size: 32\nlog-every: 1\n" + extra);
    return path;
  }

  // Lets a service's jobs read the tiny data set.
  static std::vector<std::string> ReadData() { return {"--allow-read", data_->path()}; }

  // `mgpu submit` → the job id it printed as its last line.
  int64_t Submit(const Service& service, const std::vector<std::string>& args) {
    const CommandResult result = service.Mgpu("submit", args);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::string output = result.output;
    while (!output.empty() && output.back() == '\n') output.pop_back();
    return std::stoll(output.substr(output.rfind('\n') + 1));
  }

  static TempDir* data_;
  TempDir dir_;
};

TempDir* ServeCli::data_ = nullptr;

TEST_F(ServeCli, JobsRunInQueueOrderSideBySideWhenTheyFit) {
  Service service(dir_ / "state", ReadData());
  const std::string one = Config("one.yaml", "epochs: 10\nmax-steps: 80\n");
  const std::string two = Config("two.yaml", "mode: ddp\nepochs: 10\nmax-steps: 30\n");
  const int64_t a = Submit(service, {one});
  const int64_t b = Submit(service, {one});
  const int64_t c = Submit(service, {two, "--gpus", "2"});
  const int64_t d = Submit(service, {one, "--priority", "1"});
  EXPECT_EQ(service.Job(c).state(), service::QUEUED) << "both devices are taken";
  for (int64_t id : {a, b, c, d}) ASSERT_TRUE(service.WaitForState(id, service::SUCCEEDED, 60)) << "job " << id;

  const service::Job ja = service.Job(a), jb = service.Job(b), jc = service.Job(c), jd = service.Job(d);
  // A and B ran side by side, each on its own device.
  EXPECT_LT(std::max(ja.started_unix_ms(), jb.started_unix_ms()), std::min(ja.ended_unix_ms(), jb.ended_unix_ms()));
  EXPECT_NE(ja.devices(0), jb.devices(0));
  // D (priority 1) overtook C and took the first device freed; C started once both were free.
  EXPECT_GE(jd.started_unix_ms(), std::min(ja.ended_unix_ms(), jb.ended_unix_ms()));
  EXPECT_LT(jd.started_unix_ms(), jc.started_unix_ms());
  EXPECT_GE(jc.started_unix_ms(), std::max({ja.ended_unix_ms(), jb.ended_unix_ms(), jd.ended_unix_ms()}));
  EXPECT_EQ(jc.devices_size(), 2);
  EXPECT_EQ(jc.world_size(), 2);
  EXPECT_EQ(jc.summary().steps(), 30);
  EXPECT_GT(jc.summary().images_per_second(), 0);
  EXPECT_EQ(ja.summary().status(), "ok");

  const CommandResult table = service.Mgpu("status", {});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("succeeded"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("two.yaml"), std::string::npos) << table.output;
  const CommandResult detail = service.Mgpu("status", {std::to_string(c)});
  EXPECT_NE(detail.output.find("2 process(es)"), std::string::npos) << detail.output;
  const CommandResult logs = service.Mgpu("logs", {std::to_string(c), "--rank", "1"});
  EXPECT_EQ(logs.exit_code, 0) << logs.output;
  EXPECT_NE(logs.output.find("[rank 1]"), std::string::npos) << logs.output;
  const CommandResult watch = service.Mgpu("watch", {std::to_string(a)});
  EXPECT_EQ(watch.exit_code, 0) << watch.output;
  EXPECT_NE(watch.output.find("succeeded: accuracy"), std::string::npos) << watch.output;
  EXPECT_EQ(service.Stop(SIGTERM), 0);
}

TEST_F(ServeCli, CancelStopsARunningJobAndFreesItsDevicesWithinFiveSeconds) {
  Service service(dir_ / "state", ReadData());
  const int64_t big = Submit(service, {Config("big.yaml", "mode: ddp\nepochs: 100000\n"), "--gpus", "2"});
  const int64_t next = Submit(service, {Config("next.yaml", "max-steps: 5\n")});
  const int64_t dropped = Submit(service, {Config("dropped.yaml", "max-steps: 5\n")});
  ASSERT_TRUE(WaitFor([&] { return service.Job(big).progress().step() > 2; }, 60)) << "the job did not start training";
  const std::vector<pid_t> workers = WorkerPids(service.Job(big).run_folder(), 2);
  ASSERT_EQ(workers.size(), 2u);

  const CommandResult queued = service.Mgpu("cancel", {std::to_string(dropped)});
  EXPECT_EQ(queued.exit_code, 0) << queued.output;
  EXPECT_EQ(service.Job(dropped).state(), service::CANCELLED) << "a queued job is dropped at once";

  // Follows the job's output until the job ends.
  BackgroundCommand follow({MGPU_LAUNCHER_BIN, "logs", std::to_string(big), "--follow", "--server", service.address()});
  const auto cancelled_at = Clock::now();
  const CommandResult running = service.Mgpu("cancel", {std::to_string(big)});
  EXPECT_EQ(running.exit_code, 0) << running.output;
  EXPECT_NE(running.output.find("is stopping"), std::string::npos) << running.output;
  ASSERT_TRUE(WaitFor([&] { return service.Job(next).state() != service::QUEUED; }, 5))
      << "the queued job did not get the freed devices within 5 s";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - cancelled_at).count(), 5);
  const service::Job stopped = service.Job(big);
  EXPECT_EQ(stopped.state(), service::CANCELLED);
  EXPECT_NE(stopped.message().find("cancelled"), std::string::npos) << stopped.message();
  for (pid_t pid : workers) EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }, 2)) << "worker " << pid << " left";
  const CommandResult followed = follow.Wait();
  EXPECT_EQ(followed.exit_code, 0) << followed.output;
  EXPECT_NE(followed.output.find("[rank 0] epoch 1/100000"), std::string::npos) << followed.output;
  EXPECT_NE(followed.output.find("interrupted by SIGTERM"), std::string::npos) << "up to mgpu run's last line";
  ASSERT_TRUE(service.WaitForState(next, service::SUCCEEDED, 60));
  EXPECT_EQ(service.Job(dropped).started_unix_ms(), 0) << "the cancelled queued job never ran";
  const CommandResult again = service.Mgpu("cancel", {std::to_string(big)});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("already ended (cancelled)"), std::string::npos) << again.output;
}

// A closed terminal stops the service as SIGTERM does: the running job stops with a checkpoint
// and is recorded interrupted, not killed with the service by its parent-death signal.
TEST_F(ServeCli, AHangUpStopsTheServiceAndItsRunningJobCleanly) {
  const std::string state = dir_ / "state";
  int64_t job = 0;
  std::string run;
  {
    Service service(state, ReadData());
    job = Submit(service, {Config("long.yaml", "epochs: 100000\n")});
    ASSERT_TRUE(WaitFor([&] { return service.Job(job).progress().step() > 2; }, 60)) << "the job did not start training";
    run = service.Job(job).run_folder();
    EXPECT_EQ(service.Stop(SIGHUP), 0) << ReadText(state + ".log");
  }
  EXPECT_NE(ReadText(state + ".log").find("mgpu serve was stopped (SIGHUP)"), std::string::npos) << ReadText(state + ".log");
  const nlohmann::json summary = nlohmann::json::parse(ReadText(run + "/summary.json"));
  EXPECT_EQ(summary["status"], "interrupted") << "the job stopped at a step boundary, as for SIGTERM";
  EXPECT_TRUE(IsRegularFile(run + "/checkpoints/latest.ckpt"));
  Service service(state, ReadData());
  EXPECT_EQ(service.Job(job).state(), service::INTERRUPTED);
  EXPECT_TRUE(service.Job(job).resumable());
  EXPECT_EQ(service.Stop(SIGTERM), 0);
}

TEST_F(ServeCli, AKilledServiceRestartsWithEveryJobAndTheRunningOneResumable) {
  const std::string state = dir_ / "state";
  int64_t done = 0, killed = 0, waiting = 0;
  std::vector<pid_t> orphans;
  {
    Service service(state, ReadData());
    done = Submit(service, {Config("done.yaml", "max-steps: 5\n")});
    ASSERT_TRUE(service.WaitForState(done, service::SUCCEEDED, 60));
    killed = Submit(service, {Config("long.yaml", "epochs: 100000\ncheckpoint-every: 5\n")});
    waiting = Submit(service, {Config("waiting.yaml", "mode: ddp\nmax-steps: 5\n"), "--gpus", "2"});
    const std::string run = service.Job(killed).run_folder();
    ASSERT_TRUE(WaitFor([&] { return IsRegularFile(run + "/checkpoints/latest.ckpt"); }, 60)) << "no checkpoint";
    orphans = WorkerPids(run, 1);
    ASSERT_EQ(orphans.size(), 1u);
    EXPECT_EQ(service.Stop(SIGKILL), 128 + SIGKILL);
  }
  const int64_t killed_by = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
  // The job's processes die with the service (parent-death signals), none left behind.
  for (pid_t pid : orphans) EXPECT_TRUE(WaitFor([&] { return ProcessGone(pid); }, 10)) << "worker " << pid << " left";

  // A folder the journal does not know (e.g. the journal was moved away once) is never reused.
  MakeDirectories(state + "/jobs/42/run");
  WriteBytes(state + "/jobs/42/run/summary.json", "{}");

  Service service(state, ReadData());
  service::ListJobsReply list;
  ASSERT_TRUE(service.List(&list).ok());
  ASSERT_EQ(list.jobs_size(), 3) << "every job is listed after the restart";
  EXPECT_EQ(service.Job(done).state(), service::SUCCEEDED);
  const service::Job interrupted = service.Job(killed);
  EXPECT_EQ(interrupted.state(), service::INTERRUPTED);
  EXPECT_FALSE(interrupted.has_exit_code()) << "its end was not seen: no exit code, not 0";
  EXPECT_GE(interrupted.ended_unix_ms(), interrupted.started_unix_ms());
  EXPECT_LE(interrupted.ended_unix_ms(), killed_by) << "its last sign of life, not the restart's time";
  EXPECT_TRUE(interrupted.resumable());
  EXPECT_NE(interrupted.message().find("mgpu submit --resume " + std::to_string(killed)), std::string::npos)
      << interrupted.message();
  EXPECT_NE(service.Job(waiting).state(), service::INTERRUPTED) << "a queued job stays queued, then runs";

  const CommandResult refused = service.Mgpu("submit", {"--resume", std::to_string(done)});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("job " + std::to_string(done) + " succeeded"), std::string::npos) << refused.output;

  const int64_t resumed = Submit(service, {"--resume", std::to_string(killed)});
  EXPECT_EQ(service.Job(resumed).resumes_job_id(), killed);
  EXPECT_EQ(resumed, 43);
  EXPECT_TRUE(IsRegularFile(state + "/jobs/42/run/summary.json"));
  ASSERT_TRUE(WaitFor([&] { return service.Job(resumed).progress().step() > 0; }, 60)) << "the resumed job did not train";
  const std::string log = ReadText(service.Job(resumed).run_folder() + "/logs/rank-0.log");
  EXPECT_NE(log.find("resumed from " + interrupted.run_folder() + "/checkpoints/latest.ckpt"), std::string::npos) << log;
  EXPECT_GT(service.Job(resumed).progress().step(), 5) << "it continued past the checkpoint's step";
  EXPECT_EQ(service.Job(waiting).state(), service::SUCCEEDED);
  EXPECT_EQ(service.Stop(SIGTERM), 0);
}

// Bytes of every value, fixed by the seed.
std::string RandomBytes(std::mt19937& random, size_t size) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random() & 0xff);
  return bytes;
}

// Printable text made of YAML's special characters, so it parses into odd shapes.
std::string RandomYaml(std::mt19937& random, size_t size) {
  static const std::string alphabet = "ab:- \n[]{},#&*!|>'\"%@`?0123456789.eE+~";
  std::string text(size, ' ');
  for (char& c : text) c = alphabet[random() % alphabet.size()];
  return text;
}

// A unary call with `payload` as the request bytes, whatever the method expects.
grpc::Status RawCall(grpc::GenericStub& stub, const std::string& method, const std::string& payload,
                     const std::string& token) {
  grpc::ClientContext context;
  AddToken(context, token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice slice(payload);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) { done.set_value(std::move(status)); });
  return done.get_future().get();
}

// Random bytes straight to the port, not even HTTP/2.
void RawBytes(const std::string& address, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) == 0) {
    static_cast<void>(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL));
  }
  ::close(fd);
}

TEST_F(ServeCli, TwoHundredHostileRequestsLeaveItUpAndAnswering) {
  // No default data set: an empty configuration, which random bytes may decode to, is refused too.
  Service service(dir_ / "state", {"--listen", "127.0.0.1:0"},
                  {"MGPU_TOKEN=s3cret", "FASHION_MNIST_DIR=" + dir_ / "no-data"});
  grpc::GenericStub generic(MakeCoordinatorChannel(service.address(), ""));
  const std::vector<std::string> methods = {"Submit", "ListJobs", "GetJob", "Watch", "Cancel", "Logs"};
  std::mt19937 random(20240611);
  int calls = 0;
  // Answered, whatever the answer: not a connection lost or a call left hanging.
  auto expect_answered = [&](const grpc::Status& status, const std::string& what) {
    ++calls;
    EXPECT_NE(status.error_code(), grpc::StatusCode::UNAVAILABLE) << what << ": " << status.error_message();
    EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << what;
  };
  auto expect_refused = [&](const grpc::Status& status, const std::string& what) {
    expect_answered(status, what);
    EXPECT_FALSE(status.ok()) << what << " was accepted";
  };
  const auto started = Clock::now();
  for (int i = 0; i < 40; ++i) {  // not gRPC at all
    RawBytes(service.address(), RandomBytes(random, random() % 65536));
    ++calls;
  }
  for (int i = 0; i < 40; ++i) {  // gRPC calls whose request bytes are random (or another message)
    const std::string method = "/mgpu.service.JobService/" + methods[static_cast<size_t>(i) % methods.size()];
    std::string payload = RandomBytes(random, random() % 4096);
    if (i % 5 == 0) {
      service::LogsRequest other;
      other.set_id(static_cast<int64_t>(random()));
      other.set_rank(-7);
      payload = other.SerializeAsString();
    }
    // Bytes that happen to parse (unknown fields are skipped) may get a real answer.
    expect_answered(RawCall(generic, method, payload, "s3cret"), method);
  }
  for (int i = 0; i < 40; ++i) {  // submissions: odd YAML, wrong types, huge, out-of-range fields
    service::SubmitRequest request;
    switch (i % 8) {
      case 0: request.set_config_yaml(RandomYaml(random, random() % 2048)); break;
      case 1: request.set_config_yaml("batch-size: [1, 2]\nepochs: {a: 1}\n"); break;
      case 2: request.set_config_yaml("lr: fast\nmodel: 3\n"); break;
      case 3: request.set_config_yaml(std::string(300 * 1024, 'x')); break;
      case 4: request.set_config_yaml(std::string(2 * 1024 * 1024, 'y')); break;
      case 5: request.set_gpus(static_cast<int32_t>(random())); break;
      case 6: request.set_priority(static_cast<int32_t>(random())); break;
      default: request.set_resume_job_id(static_cast<int64_t>(random()) - (int64_t{1} << 31)); break;
    }
    request.set_config_name(RandomYaml(random, random() % 300));
    grpc::ClientContext context;
    AddToken(context, "s3cret");
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    service::SubmitReply reply;
    expect_refused(service.stub().Submit(&context, request, &reply), "submit " + std::to_string(i));
  }
  const std::vector<int64_t> ids = {0, -1, INT64_MIN, INT64_MAX, 987654321};
  for (int i = 0; i < 40; ++i) {  // ids of no job, ranks out of range
    const int64_t id = ids[static_cast<size_t>(i) % ids.size()];
    grpc::ClientContext context;
    AddToken(context, "s3cret");
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    service::Job job;
    if (i % 4 == 0) {
      service::GetJobRequest request;
      request.set_id(id);
      expect_refused(service.stub().GetJob(&context, request, &job), "get");
    } else if (i % 4 == 1) {
      service::CancelRequest request;
      request.set_id(id);
      service::CancelReply reply;
      expect_refused(service.stub().Cancel(&context, request, &reply), "cancel");
    } else if (i % 4 == 2) {
      service::WatchRequest request;
      request.set_id(id);
      auto reader = service.stub().Watch(&context, request);
      while (reader->Read(&job)) {
      }
      expect_refused(reader->Finish(), "watch");
    } else {
      service::LogsRequest request;
      request.set_id(id);
      request.set_rank(static_cast<int32_t>(random()));
      service::LogChunk chunk;
      auto reader = service.stub().Logs(&context, request);
      while (reader->Read(&chunk)) {
      }
      expect_refused(reader->Finish(), "logs");
    }
  }
  const std::vector<std::string> tokens = {"", "wrong", std::string(4000, 'k'), "s3cre", "S3CRET"};
  for (int i = 0; i < 40; ++i) {  // bad or missing tokens
    service::ListJobsReply reply;
    const grpc::Status status = service.List(&reply, tokens[static_cast<size_t>(i) % tokens.size()]);
    expect_refused(status, "token");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  EXPECT_EQ(calls, 200);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), 60);

  EXPECT_FALSE(ProcessGone(service.pid())) << ReadText(dir_ / "state.log");
  service::ListJobsReply list;
  const grpc::Status status = service.List(&list, "s3cret");
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(list.jobs_size(), 0) << "nothing hostile was queued";
  const CommandResult table = service.Mgpu("status", {}, {"MGPU_TOKEN=s3cret"});
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("no jobs yet"), std::string::npos) << table.output;
  const CommandResult unauthenticated = service.Mgpu("status", {});
  EXPECT_EQ(unauthenticated.exit_code, 2) << unauthenticated.output;
  EXPECT_NE(unauthenticated.output.find("requires a token"), std::string::npos) << unauthenticated.output;
  EXPECT_EQ(service.Stop(SIGTERM), 0);
}

TEST_F(ServeCli, ServesOverTlsToClientsThatTrustIt) {
  // A self-signed certificate for 127.0.0.1, made with the openssl tool (scripts/setup.sh installs it).
  const CommandResult made =
      RunCommand({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=mgpu-test",
                  "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", dir_ / "serve.key", "-out", dir_ / "serve.pem"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  WriteBytes(dir_ / "token", "s3cret\n");
  ASSERT_EQ(::chmod((dir_ / "token").c_str(), 0600), 0);
  Service service(dir_ / "state", {"--listen", "127.0.0.1:0", "--token-file", dir_ / "token", "--tls-cert",
                                   dir_ / "serve.pem", "--tls-key", dir_ / "serve.key"});
  const CommandResult trusted = service.Mgpu("status", {"--tls-ca", dir_ / "serve.pem", "--token-file", dir_ / "token"});
  EXPECT_EQ(trusted.exit_code, 0) << trusted.output;
  EXPECT_NE(trusted.output.find("no jobs yet"), std::string::npos) << trusted.output;
  const CommandResult plain = service.Mgpu("status", {"--token-file", dir_ / "token"});
  EXPECT_EQ(plain.exit_code, 1) << plain.output;
  EXPECT_NE(plain.output.find("cannot reach mgpu serve"), std::string::npos) << plain.output;
}

TEST_F(ServeCli, ClientsSayWhereNoServiceAnswers) {
  const std::string address = "127.0.0.1:" + std::to_string(FreeLocalPort());
  const CommandResult result = RunCommand({MGPU_LAUNCHER_BIN, "status", "--server", address});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("cannot reach mgpu serve at " + address), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("Start one with `mgpu serve`"), std::string::npos) << result.output;
}

// Whether a process running as `uid` can connect to the Unix socket at `path` (0), or the errno.
int ConnectAs(uid_t uid, const std::string& path) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(100);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
    ::_exit(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(ServeCli, ByDefaultOnlyTheServicesUserReachesItOnAPrivateSocket) {
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);  // so that the state folder's own mode is what keeps others out
  Service service(dir_ / "state", ReadData());
  const std::string socket = dir_ / "state/serve.sock";
  EXPECT_EQ(service.address(), "unix:" + socket) << "no TCP unless --listen";
  struct stat info {};
  ASSERT_EQ(::stat(socket.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ / "state").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  const CommandResult mine = service.Mgpu("status", {});
  EXPECT_EQ(mine.exit_code, 0) << "its own user needs no token: " << mine.output;
  EXPECT_NE(mine.output.find("no jobs yet"), std::string::npos) << mine.output;
  if (::geteuid() == 0) {
    EXPECT_EQ(ConnectAs(65534, socket), EACCES) << "another user (nobody) cannot even connect";
  }
}

TEST_F(ServeCli, TokensOnTheCommandLineAreRefusedSayingHowToPassThem) {
  const CommandResult serve =
      RunCommand({MGPU_LAUNCHER_BIN, "serve", "--listen", "127.0.0.1:0", "--token", "s3cret", "--state-dir", dir_ / "s"});
  EXPECT_EQ(serve.exit_code, 2) << serve.output;
  EXPECT_NE(serve.output.find("--token-file FILE, or set MGPU_TOKEN"), std::string::npos) << serve.output;
  EXPECT_FALSE(PathExists(dir_ / "s/serve.sock")) << "refused before it started";
  const CommandResult client = RunCommand({MGPU_LAUNCHER_BIN, "status", "--token", "s3cret", "--server", "127.0.0.1:1"});
  EXPECT_EQ(client.exit_code, 2) << client.output;
  EXPECT_NE(client.output.find("--token-file FILE, or set MGPU_TOKEN"), std::string::npos) << client.output;
}

TEST_F(ServeCli, TcpNeedsATokenAndTlsUnlessEveryAddressIsLoopback) {
  auto serve = [&](const std::string& listen, const std::vector<std::string>& env) {
    std::vector<std::string> argv = {MGPU_LAUNCHER_BIN, "serve", "--listen", listen, "--state-dir", dir_ / "s"};
    for (const std::string& flag : RootFlag()) argv.push_back(flag);
    return RunCommand(argv, env);
  };
  const CommandResult no_token = serve("127.0.0.1:0", {});
  EXPECT_EQ(no_token.exit_code, 2) << no_token.output;
  EXPECT_NE(no_token.output.find("give a shared secret in --token-file FILE"), std::string::npos) << no_token.output;
  const CommandResult in_clear = serve("0.0.0.0:0", {"MGPU_TOKEN=s3cret"});
  EXPECT_EQ(in_clear.exit_code, 2) << in_clear.output;
  EXPECT_NE(in_clear.output.find("token would cross the network in clear"), std::string::npos) << in_clear.output;
  // Spelt like loopback, but a name that resolves to nothing loopback.
  const CommandResult spoofed = serve("127.attacker.invalid:0", {"MGPU_TOKEN=s3cret"});
  EXPECT_EQ(spoofed.exit_code, 2) << spoofed.output;
  EXPECT_NE(spoofed.output.find("not (only) a loopback address"), std::string::npos) << spoofed.output;
}

TEST_F(ServeCli, RootIsRefusedUnlessAllowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (the rule itself: ServeOptions.RootIsRefusedUnlessAllowed)";
  const CommandResult root = RunCommand({MGPU_LAUNCHER_BIN, "serve", "--state-dir", dir_ / "s"});
  EXPECT_EQ(root.exit_code, 2) << root.output;
  EXPECT_NE(root.output.find("run it as a dedicated user"), std::string::npos) << root.output;
}

TEST_F(ServeCli, JobPathsOutsideTheAllowedFoldersAreRefusedAtSubmit) {
  MakeDirectories(dir_ / "outside");
  WriteBytes(dir_ / "outside/important.conf", "keep me\n");
  MakeDirectories(dir_ / "shared");
  ASSERT_EQ(::symlink((dir_ / "outside").c_str(), (dir_ / "shared/escape").c_str()), 0);
  std::vector<std::string> flags = ReadData();
  flags.insert(flags.end(), {"--allow-path", dir_ / "shared"});
  Service service(dir_ / "state", flags);
  const std::vector<std::pair<std::string, std::string>> attacks = {
      {"checkpoint: " + dir_ / "outside" + "\ncheckpoint-name: important.conf\n", "'checkpoint: "},
      {"checkpoint: \"{out}/../../../../escape\"\n", "'checkpoint: {out}/../../../../escape'"},
      {"tensorboard-log: ../../../x\n", "'tensorboard-log: ../../../x'"},
      {"tensorboard-log: " + dir_ / "shared/escape" + "\n", "resolves to " + dir_ / "outside"},
      {"memory-snapshot: " + dir_ / "outside/snap.pickle" + "\n", "'memory-snapshot: "},
      {"resume: " + dir_ / "outside/important.conf" + "\n", "'resume: "},
  };
  for (const auto& [yaml, named] : attacks) {
    const CommandResult refused = service.Mgpu("submit", {Config("attack.yaml", yaml)});
    EXPECT_EQ(refused.exit_code, 2) << yaml << refused.output;
    EXPECT_NE(refused.output.find(named), std::string::npos) << refused.output;
    EXPECT_NE(refused.output.find("outside the folders this job may"), std::string::npos) << refused.output;
  }
  EXPECT_EQ(ReadText(dir_ / "outside/important.conf"), "keep me\n");
  service::ListJobsReply list;
  ASSERT_TRUE(service.List(&list).ok());
  EXPECT_EQ(list.jobs_size(), 0) << "nothing was queued";
  const int64_t allowed = Submit(service, {Config("allowed.yaml", "max-steps: 2\ntensorboard-log: " + dir_ / "shared/tb" + "\n")});
  ASSERT_TRUE(service.WaitForState(allowed, service::SUCCEEDED, 60)) << service.Job(allowed).message();
  EXPECT_TRUE(IsDirectory(dir_ / "shared/tb/run")) << "an --allow-path folder takes outputs";
}

TEST_F(ServeCli, APluginRunsNoCodeUnlessTheOperatorAllowsPluginsFromItsFolder) {
  MakeDirectories(dir_ / "models");
  WriteBytes(dir_ / "models/marker.so", ReadText(MGPU_MARKER_PLUGIN));
  const std::string marker = dir_ / "marker";
  const std::string config = Config("plugin.yaml", "max-steps: 2\nmodel: plugin:" + dir_ / "models/marker.so" + ":x\n");
  {
    std::vector<std::string> flags = ReadData();
    flags.insert(flags.end(), {"--allow-read", dir_ / "models"});
    Service service(dir_ / "state", flags, {"MGPU_TEST_PLUGIN_MARKER=" + marker});
    const CommandResult refused = service.Mgpu("submit", {config});
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("loads no plugins"), std::string::npos) << refused.output;
    EXPECT_NE(refused.output.find("--allow-plugins"), std::string::npos) << refused.output;
  }
  {
    std::vector<std::string> flags = ReadData();
    flags.push_back("--allow-plugins");
    Service service(dir_ / "state", flags, {"MGPU_TEST_PLUGIN_MARKER=" + marker});
    const CommandResult refused = service.Mgpu("submit", {config});
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("outside the folders this job may load models from"), std::string::npos)
        << refused.output;
  }
  EXPECT_FALSE(PathExists(marker)) << "the refused plugin's constructor never ran";
  // Allowed on both counts, the library is loaded (the job then fails: it has no model factory):
  // the marker shows that this test would see a constructor run.
  std::vector<std::string> flags = ReadData();
  flags.insert(flags.end(), {"--allow-read", dir_ / "models", "--allow-plugins"});
  Service service(dir_ / "state", flags, {"MGPU_TEST_PLUGIN_MARKER=" + marker});
  const int64_t id = Submit(service, {config});
  EXPECT_TRUE(WaitFor([&] { return PathExists(marker); }, 60)) << service.Job(id).message();
}

TEST_F(ServeCli, ADirectoryOrATextThatIsNotUtf8IsRefusedNamingIt) {
  Service service(dir_ / "state", ReadData());
  const CommandResult folder = service.Mgpu("submit", {dir_.path()});
  EXPECT_EQ(folder.exit_code, 2) << folder.output;
  EXPECT_NE(folder.output.find(dir_.path() + " is a folder"), std::string::npos) << folder.output;
  const std::string latin1 = Config("latin1.yaml", "name: caf\xe9\n");
  const size_t offset = ReadText(latin1).find('\xe9');
  const CommandResult text = service.Mgpu("submit", {latin1});
  EXPECT_EQ(text.exit_code, 2) << text.output;
  EXPECT_NE(text.output.find(latin1 + " is not UTF-8 text: byte " + std::to_string(offset)), std::string::npos)
      << text.output;
  EXPECT_EQ(text.output.find("libprotobuf"), std::string::npos) << text.output;
  service::ListJobsReply list;
  ASSERT_TRUE(service.List(&list).ok());
  EXPECT_EQ(list.jobs_size(), 0);
}

}  // namespace
}  // namespace mgpu
