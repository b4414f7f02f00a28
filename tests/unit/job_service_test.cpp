// mgpu serve's rules without running a job: which devices it owns (--gpus), where it may listen,
// what a submission must satisfy (and the flags the service adds), how progress is read from a
// run folder, and the JobService over a real gRPC channel: the token on every call, requests
// validated, refusals with their reason.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "common/files.h"
#include "launcher/job_manager.h"
#include "launcher/job_outputs.h"
#include "launcher/job_service.h"
#include "launcher/job_submission.h"
#include "launcher/serve_options.h"
#include "launcher/state_dir_lock.h"
#include "service/job_service.grpc.pb.h"
#include "tests/support/test_support.h"
#include "worker/coordinator_client.h"

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
  ServeOptions open;
  open.listen = "0.0.0.0:29600";
  EXPECT_NE(BadInputMessage([&] { ValidateServeOptions(open); }).find("not a loopback address"), std::string::npos);
  open.token = "s3cret";
  EXPECT_NO_THROW(ValidateServeOptions(open));
  ServeOptions half_tls;
  half_tls.tls_cert = "cert.pem";
  EXPECT_NE(BadInputMessage([&] { ValidateServeOptions(half_tls); }).find("go together"), std::string::npos);
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
    return PrepareJob(7, submission, state_ / "jobs/7", ParseDeviceSlots("cpu,cpu", 0), checkpoint_every);
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
  EXPECT_NE(Refusal("data-dir: relative/data\n").find("relative path"), std::string::npos);
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

// The JobService in this process, over a real channel, with a token. No job is ever started: only
// refused requests are sent (a started job would run this test binary as `mgpu run`).
class JobServiceCalls : public ::testing::Test {
 protected:
  JobServiceCalls() {
    ManagerOptions options;
    options.state_dir = state_.path();
    options.slots = ParseDeviceSlots("cpu,cpu", 0);
    manager_ = std::make_unique<JobManager>(options);
    server_ = std::make_unique<JobServer>(*manager_, "127.0.0.1", 0, ServerSecurity{"s3cret", "", ""});
    stub_ = service::JobService::NewStub(MakeCoordinatorChannel(server_->address(), ""));
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
    JobJournal journal(state / "jobs.journal", 1);
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
