// mgpu serve's rules without running a job: which devices it owns (--gpus), where it may listen
// (TCP only with a token, TLS unless loopback after resolution), who may run it (not root without
// --allow-root), where a token comes from (never argv; a private file), what a submission must
// satisfy (and the flags the service adds), how progress is read from a run folder, and the
// JobService over real gRPC channels: its Unix socket admits only allowed uids, TCP calls need
// the token, requests are validated, refusals come with their reason.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "common/files.h"
#include "common/server_ports.h"
#include "launcher/net.h"
#include "launcher/serve/job_manager.h"
#include "launcher/serve/job_outputs.h"
#include "launcher/serve/job_service.h"
#include "launcher/serve/job_submission.h"
#include "launcher/serve/peer_socket.h"
#include "launcher/serve/serve_options.h"
#include "launcher/serve/state_dir_lock.h"
#include "rpc/channel.h"
#include "rpc/server_security.h"
#include "service/job_service.grpc.pb.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(ServeOptions, DevicesAreGpuIndicesOrCpuSlots) {
  const DeviceSlots gpus = ParseDeviceSlots("0,2", 4);
  EXPECT_TRUE(gpus.cuda);
  EXPECT_EQ(gpus.names, (std::vector<std::string>{"0", "2"}));
  const DeviceSlots cpus = ParseDeviceSlots("cpu,cpu,cpu", 4);
  EXPECT_FALSE(cpus.cuda);
  EXPECT_EQ(cpus.count(), 3);
  // Without a visible GPU, indices name CPU slots; by default: every GPU, else 2 CPU slots.
  EXPECT_FALSE(ParseDeviceSlots("0,1", 0).cuda);
  EXPECT_EQ(ParseDeviceSlots("0,1", 0).count(), 2);
  EXPECT_EQ(ParseDeviceSlots("", 3).names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(ParseDeviceSlots("", 0).names, (std::vector<std::string>{"cpu", "cpu"}));
  EXPECT_NE(BadInputMessage([] { ParseDeviceSlots("0,7", 2); }).find("GPU 7 does not exist"), std::string::npos);
  EXPECT_NE(BadInputMessage([] { ParseDeviceSlots("1,1", 2); }).find("GPU 1 is listed twice"), std::string::npos);
  EXPECT_NE(BadInputMessage([] { ParseDeviceSlots("0,cpu", 2); }).find("not a mix"), std::string::npos);
  EXPECT_NE(BadInputMessage([] { ParseDeviceSlots("0,,1", 2); }).find("expected GPU indices"), std::string::npos);
}

TEST(ServeOptions, AddressesAndTheLoopbackRule) {
  EXPECT_EQ(ParseHostPort("127.0.0.1:29600", "--listen", 0).port, 29600);
  EXPECT_EQ(ParseHostPort("[::1]:0", "--listen", 0).host, "::1");
  EXPECT_NE(BadInputMessage([] { ParseHostPort("localhost", "--server", 1); }).find("expected HOST:PORT"),
            std::string::npos);
  EXPECT_NE(BadInputMessage([] { ParseHostPort("h:0", "--server", 1); }).find("from 1 to 65535"), std::string::npos);
  ServeOptions socket_only;
  EXPECT_NO_THROW(ValidateServeOptions(socket_only)) << "by default: the Unix socket, nothing on TCP";
  ServeOptions tcp;
  tcp.listen = "127.0.0.1:29600";
  EXPECT_NE(BadInputMessage([&] { ValidateServeOptions(tcp); }).find("--token-file"), std::string::npos)
      << "TCP needs a token, even on loopback";
  tcp.token = "s3cret";
  EXPECT_NO_THROW(ValidateServeOptions(tcp));
  tcp.listen = "localhost:0";
  EXPECT_NO_THROW(ValidateServeOptions(tcp)) << "localhost resolves to loopback only";
  tcp.listen = "0.0.0.0:29600";
  EXPECT_NE(BadInputMessage([&] { ValidateServeOptions(tcp); }).find("token would cross the network in clear"),
            std::string::npos);
  tcp.tls_cert = "cert.pem";
  tcp.tls_key = "key.pem";
  EXPECT_NO_THROW(ValidateServeOptions(tcp)) << "TLS and a token";
  ServeOptions half_tls;
  half_tls.listen = "127.0.0.1:0";
  half_tls.token = "s3cret";
  half_tls.tls_cert = "cert.pem";
  EXPECT_NE(BadInputMessage([&] { ValidateServeOptions(half_tls); }).find("go together"), std::string::npos);
  ServeOptions tls_without_tcp;
  tls_without_tcp.tls_cert = "cert.pem";
  tls_without_tcp.tls_key = "key.pem";
  EXPECT_NE(BadInputMessage([&] { ValidateServeOptions(tls_without_tcp); }).find("are for TCP"), std::string::npos);
}

// `mgpu run`'s rendezvous port on one node: free, and below the ephemeral range, where no outgoing
// connection can take it before rank 0 listens (common/server_ports.h).
TEST(FreeTcpPort, PicksAFreePortBelowTheEphemeralRange) {
  if (ServerPortCandidates(EphemeralPorts(), 1).empty()) {
    GTEST_SKIP() << "this machine's ephemeral range starts at " << EphemeralPorts().low << ": no port below it";
  }
  const int port = FreeTcpPort("127.0.0.1");
  EXPECT_LT(port, EphemeralPorts().low);
  EXPECT_GE(port, 1024);
  EXPECT_NO_THROW(CheckPortFree("127.0.0.1", port, "--master-port"));
}

TEST(ServeOptions, LoopbackIsWhatANameResolvesToNotHowItIsSpelt) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.3.2.1"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]"));
  EXPECT_TRUE(IsLoopbackAddress("localhost"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackAddress("10.1.2.3"));
  EXPECT_FALSE(IsLoopbackAddress("::"));
  // Starts like a loopback address, but is a name (.invalid never resolves): not loopback.
  EXPECT_FALSE(IsLoopbackAddress("127.attacker.invalid"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.1.invalid"));
  ServeOptions spoofed;
  spoofed.listen = "127.attacker.invalid:29600";
  spoofed.token = "s3cret";
  EXPECT_NE(BadInputMessage([&] { ValidateServeOptions(spoofed); }).find("not (only) a loopback address"),
            std::string::npos);
}

TEST(ServeOptions, RootIsRefusedUnlessAllowed) {
  ServeOptions options;
  EXPECT_NE(BadInputMessage([&] { CheckServiceUser(options, 0); }).find("run it as a dedicated user"),
            std::string::npos);
  EXPECT_NO_THROW(CheckServiceUser(options, 1000));
  options.allow_root = true;
  EXPECT_NO_THROW(CheckServiceUser(options, 0));
}

TEST(ServeOptions, TokensComeFromAPrivateFileOrTheEnvironmentNeverTheCommandLine) {
  TempDir dir;
  WriteBytes(dir / "token", "s3cret\nignored\n");
  ASSERT_EQ(::chmod((dir / "token").c_str(), 0644), 0);
  EXPECT_NE(BadInputMessage([&] { LoadToken(dir / "token", nullptr); }).find("chmod 600"), std::string::npos)
      << "a token others can read is no secret";
  ASSERT_EQ(::chmod((dir / "token").c_str(), 0600), 0);
  EXPECT_EQ(LoadToken(dir / "token", "from-env"), "s3cret") << "the file wins; its first line";
  EXPECT_EQ(LoadToken("", "from-env"), "from-env");
  EXPECT_EQ(LoadToken("", nullptr), "");
  WriteBytes(dir / "empty", "\n");
  ASSERT_EQ(::chmod((dir / "empty").c_str(), 0600), 0);
  EXPECT_NE(BadInputMessage([&] { LoadToken(dir / "empty", nullptr); }).find("first line is empty"), std::string::npos);
  EXPECT_NE(BadInputMessage([&] { LoadToken(dir / "nowhere", nullptr); }).find("not a readable file"), std::string::npos);
  EXPECT_NE(TokenOnCommandLineMessage("mgpu serve").find("--token-file FILE, or set MGPU_TOKEN"), std::string::npos);
}

TEST(StateDirLock, OneServicePerStateFolder) {
  TempDir dir;
  {
    StateDirLock first(dir.path());
    const std::string message = BadInputMessage([&] { StateDirLock second(dir.path()); });
    EXPECT_NE(message.find("another mgpu serve (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(StateDirLock again(dir.path())) << "released with its holder";
}

TEST(JobOutputs, ProgressIsTheLastCompleteMetricsRow) {
  TempDir run;
  EXPECT_FALSE(ReadProgress(run.path()));
  WriteBytes(run / "metrics.csv", "step,epoch,loss,lr,images_per_second\n");
  EXPECT_FALSE(ReadProgress(run.path())) << "a header is no progress";
  WriteBytes(run / "metrics.csv", "step,epoch,loss,lr,images_per_second\n5,0,2.25,0.001,1500\n10,1,1.5,0.001,1800\n11,1,1.");
  const std::optional<JobProgress> progress = ReadProgress(run.path());
  ASSERT_TRUE(progress);
  EXPECT_EQ(progress->step, 10) << "the torn row being written is skipped";
  EXPECT_EQ(progress->epoch, 2) << "counted from 1";
  EXPECT_EQ(progress->loss, 1.5);
  EXPECT_EQ(progress->images_per_second, 1800);
}

TEST(JobOutputs, ResultComesFromSummaryJson) {
  TempDir run;
  EXPECT_FALSE(ReadResult(run.path()));
  WriteBytes(run / "summary.json", R"({"status": "ok", "error": null, "test_accuracy": 88.5, "test_loss": 0.3,
      "steps": 40, "total_seconds": 2.5, "launcher": {"world_images_per_second": 2100}})");
  const std::optional<JobResult> result = ReadResult(run.path());
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, "ok");
  EXPECT_EQ(result->test_accuracy, 88.5);
  EXPECT_EQ(result->steps, 40);
  EXPECT_EQ(result->images_per_second, 2100);
  WriteBytes(run / "summary.json", "{\"status\": \"ok\", ");
  EXPECT_FALSE(ReadResult(run.path())) << "torn";
}

class JobSubmission : public ::testing::Test {
 protected:
  void SetUp() override { WriteTinyMnistLike(data_ / "mnist", 64, 32); }

  JobRecord Prepare(const std::string& yaml, int gpus = 1, int64_t checkpoint_every = 500) {
    Submission submission;
    submission.config_yaml = yaml;
    submission.config_name = "job.yaml";
    submission.gpus = gpus;
    PathPolicy paths;
    paths.read_only = {AllowedFolder(data_.path(), "--allow-read")};
    return PrepareJob(7, submission, state_ / "jobs/7", ParseDeviceSlots("cpu,cpu", 0), checkpoint_every, paths);
  }
  std::string Refusal(const std::string& yaml, int gpus = 1) {
    const std::string message = BadInputMessage([&] { Prepare(yaml, gpus); });
    EXPECT_FALSE(PathExists(state_ / "jobs/7")) << "a refused job leaves no folder";
    return message;
  }
  std::string DataDir() const { return "data-dir: " + data_ / "mnist" + "\n"; }

  TempDir data_;
  TempDir state_;
};

TEST_F(JobSubmission, AnAcceptedJobRunsWithTheServicesFlags) {
  const JobRecord job = Prepare(DataDir() + "model: lenet\nmode: ddp\nmax-steps: 5\n", 2);
  EXPECT_EQ(job.world_size, 2) << "ddp: a process per device";
  EXPECT_EQ(job.mode, "ddp");
  EXPECT_EQ(job.max_steps, 5);
  EXPECT_EQ(job.run_folder, state_ / "jobs/7/run");
  EXPECT_EQ(ReadText(state_ / "jobs/7/submitted.yaml"), DataDir() + "model: lenet\nmode: ddp\nmax-steps: 5\n");
  const std::string args = fmt::format("{}", fmt::join(job.worker_args, " "));
  EXPECT_NE(args.find("--out " + state_ / "jobs/7/run"), std::string::npos) << args;
  EXPECT_NE(args.find("--device cpu"), std::string::npos) << "CPU slots: " << args;
  EXPECT_NE(args.find("--checkpoint-every 500"), std::string::npos) << "resumable by default: " << args;
  const JobRecord own = Prepare(DataDir() + "checkpoint-every: 3\ndevice: cpu\n", 1);
  const std::string own_args = fmt::format("{}", fmt::join(own.worker_args, " "));
  EXPECT_EQ(own_args.find("--checkpoint-every"), std::string::npos) << "the configuration's own interval stays";
  EXPECT_EQ(own_args.find("--device"), std::string::npos) << own_args;
  EXPECT_EQ(own.world_size, 1);
}

TEST_F(JobSubmission, BadConfigurationsAreRefusedWithTheReason) {
  EXPECT_NE(Refusal(DataDir() + "bogus-key: 1\n").find("job.yaml:2: unknown key 'bogus-key'"), std::string::npos);
  EXPECT_NE(Refusal(DataDir() + "batch-size: many\n").find("key 'batch-size'"), std::string::npos);
  EXPECT_NE(Refusal(DataDir() + "epochs: [1, 2]\n").find("needs a single value"), std::string::npos);
  EXPECT_NE(Refusal(DataDir() + "[a, b]: 1\n").find("a key must be an option name"), std::string::npos);
  EXPECT_NE(Refusal(DataDir() + "rank: 1\n").find("'rank' is set by mgpu run"), std::string::npos);
  EXPECT_NE(Refusal("data-dir: relative/data\n").find("data folder " + state_ / "jobs/7/relative/data "), std::string::npos)
      << "a relative path is taken from the job folder";
}

TEST_F(JobSubmission, ImpossibleDeviceCountsAndDevicesAreRefused) {
  EXPECT_NE(Refusal(DataDir() + "mode: ddp\n", 3).find("--gpus 3: this service owns 2 device(s)"), std::string::npos);
  EXPECT_NE(Refusal(DataDir(), 0).find("ask for 1 to 2"), std::string::npos);
  EXPECT_NE(Refusal(DataDir() + "mode: single\n", 2).find("mode single"), std::string::npos);
  EXPECT_NE(Refusal(DataDir() + "mode: dp\n", 1).find("mode dp"), std::string::npos);
  EXPECT_NE(Refusal(DataDir() + "device: cuda\n").find("CPU slots"), std::string::npos);
}

TEST_F(JobSubmission, MissingDataIsRefusedNamingWhatIsMissing) {
  EXPECT_NE(Refusal("data-dir: " + data_ / "nowhere" + "\n").find("does not exist on the service's host"),
            std::string::npos);
  RemovePath(data_ / "mnist/t10k-labels-idx1-ubyte.gz");
  const std::string message = Refusal(DataDir() + "dataset: mnist\n");
  EXPECT_NE(message.find("t10k-labels-idx1-ubyte[.gz] missing"), std::string::npos) << message;
  EXPECT_NO_THROW(Prepare("dataset: synthetic\n")) << "synthetic data needs no files";
}

// The JobService in this process, over TCP with a token and over its Unix socket. No job is ever
// started: only refused requests are sent (a started job would run this test binary as `mgpu run`).
class JobServiceCalls : public ::testing::Test {
 protected:
  JobServiceCalls() {
    ManagerOptions options;
    options.state_dir = state_.path();
    options.slots = ParseDeviceSlots("cpu,cpu", 0);
    manager_ = std::make_unique<JobManager>(options);
    server_ = std::make_unique<JobServer>(*manager_, Endpoints("s3cret", {::geteuid()}));
    stub_ = service::JobService::NewStub(MakeCoordinatorChannel(server_->tcp_address(), ""));
  }

  JobEndpoints Endpoints(const std::string& token, std::vector<uid_t> socket_uids) const {
    JobEndpoints endpoints;
    endpoints.socket_path = SocketPath(state_.path());
    endpoints.socket_uids = std::move(socket_uids);
    endpoints.tcp_host = "127.0.0.1";
    endpoints.security.token = token;
    return endpoints;
  }
  static grpc::Status List(service::JobService::Stub& stub, const std::string& token = "") {
    grpc::ClientContext context;
    AddToken(context, token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    service::ListJobsReply reply;
    return stub.ListJobs(&context, service::ListJobsRequest(), &reply);
  }
  grpc::Status Submit(const service::SubmitRequest& request, const std::string& token = "s3cret") {
    grpc::ClientContext context;
    AddToken(context, token);
    service::SubmitReply reply;
    return stub_->Submit(&context, request, &reply);
  }
  grpc::Status Get(int64_t id, const std::string& token = "s3cret") {
    grpc::ClientContext context;
    AddToken(context, token);
    service::GetJobRequest request;
    request.set_id(id);
    service::Job job;
    return stub_->GetJob(&context, request, &job);
  }

  TempDir state_;
  std::unique_ptr<JobManager> manager_;
  std::unique_ptr<JobServer> server_;
  std::unique_ptr<service::JobService::Stub> stub_;
};

TEST_F(JobServiceCalls, TheSocketAdmitsItsOwnerWithoutATokenAndNoOtherUid) {
  const std::string socket = SocketPath(state_.path());
  struct stat info {};
  ASSERT_EQ(::stat(socket.c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "only its owner (and root) can connect";
  EXPECT_EQ(server_->socket_address(), "unix:" + socket);
  auto local = service::JobService::NewStub(MakeCoordinatorChannel(server_->socket_address(), ""));
  EXPECT_TRUE(List(*local).ok()) << "the peer's uid, from the kernel, is its credential";

  // The same service admitting another uid only: this process's connection is closed unanswered.
  server_.reset();
  const uid_t someone_else = ::geteuid() == 4242 ? 4343 : 4242;
  server_ = std::make_unique<JobServer>(*manager_, Endpoints("s3cret", {someone_else}));
  auto refused = service::JobService::NewStub(MakeCoordinatorChannel(server_->socket_address(), ""));
  const grpc::Status status = List(*refused, "s3cret");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(JobServiceCalls, TcpWithoutATokenIsRefused) {
  server_.reset();
  server_ = std::make_unique<JobServer>(*manager_, Endpoints("", {::geteuid()}));
  auto tcp = service::JobService::NewStub(MakeCoordinatorChannel(server_->tcp_address(), ""));
  const grpc::Status status = List(*tcp);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
}

TEST_F(JobServiceCalls, AConfigurationThatIsNotUtf8IsRefusedNamingTheByte) {
  service::SubmitRequest request;
  request.set_config_yaml("epochs: 1\nname: caf\xe9\n");
  request.set_config_name("latin1.yaml");
  const grpc::Status status = Submit(request);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("latin1.yaml is not UTF-8 text: byte 19 (0xe9)"), std::string::npos)
      << status.error_message();
}

TEST_F(JobServiceCalls, EveryCallNeedsTheToken) {
  EXPECT_EQ(Get(1, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status wrong = Get(1, "guess");
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(wrong.error_message().find("wrong token"), std::string::npos);
  EXPECT_EQ(Submit(service::SubmitRequest(), "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext context;
  service::WatchRequest watch;
  watch.set_id(1);
  auto reader = stub_->Watch(&context, watch);
  service::Job job;
  EXPECT_FALSE(reader->Read(&job));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED) << "streams too";
}

TEST_F(JobServiceCalls, RequestsAreValidatedBeforeAnythingHappens) {
  EXPECT_EQ(Get(0).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Get(-5).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Get(42).error_code(), grpc::StatusCode::NOT_FOUND);
  service::SubmitRequest huge;
  huge.set_config_yaml(std::string(300 * 1024, '#'));
  const grpc::Status too_big = Submit(huge);
  EXPECT_EQ(too_big.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(too_big.error_message().find("at most 262144"), std::string::npos) << too_big.error_message();
  service::SubmitRequest priority;
  priority.set_priority(1 << 30);
  EXPECT_EQ(Submit(priority).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  service::SubmitRequest both;
  both.set_resume_job_id(3);
  both.set_config_yaml("epochs: 1\n");
  EXPECT_EQ(Submit(both).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  service::SubmitRequest unknown;
  unknown.set_resume_job_id(3);
  EXPECT_EQ(Submit(unknown).error_code(), grpc::StatusCode::NOT_FOUND);
  service::SubmitRequest refused;
  refused.set_config_yaml("bogus: 1\n");
  refused.set_config_name("mine.yaml");
  const grpc::Status reason = Submit(refused);
  EXPECT_EQ(reason.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(reason.error_message().find("mine.yaml:1: unknown key 'bogus'"), std::string::npos) << reason.error_message();
  grpc::ClientContext context;
  AddToken(context, "s3cret");
  service::ListJobsReply list;
  ASSERT_TRUE(stub_->ListJobs(&context, service::ListJobsRequest(), &list).ok());
  EXPECT_EQ(list.jobs_size(), 0) << "nothing was queued";
  EXPECT_EQ(list.devices_size(), 2);
}

TEST(JobManagerRestart, AQueuedJobNeedingMoreDevicesThanNowOwnedFailsInsteadOfBlockingTheQueue) {
  TempDir state;
  {
    JobJournal journal(state / "jobs.journal");
    JobRecord job;
    job.id = 3;
    job.gpus = 4;
    job.world_size = 4;
    job.mode = "ddp";
    job.job_folder = state / "jobs/3";
    job.run_folder = job.job_folder + "/run";
    journal.Append(job);
  }
  ManagerOptions options;
  options.state_dir = state.path();
  options.slots = ParseDeviceSlots("cpu,cpu", 0);
  JobManager manager(options);
  service::Job job;
  ASSERT_TRUE(manager.Get(3, &job).ok());
  EXPECT_EQ(job.state(), service::FAILED);
  EXPECT_NE(job.message().find("needs 4 devices but the service now owns 2"), std::string::npos) << job.message();
  ASSERT_EQ(manager.warnings().size(), 1u);
}

}  // namespace
}  // namespace mgpu
