// The coordinator service over a real gRPC channel: the token is checked on every RPC, and
// worker input is validated (ranks in range, one registration per rank, sizes bounded). Also
// `mgpu run`'s own flags: what is the launcher's, what goes to the workers, and what is unsafe.
#include <gtest/gtest.h>

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "coordinator/coordinator.grpc.pb.h"
#include "launcher/coordinator_server.h"
#include "launcher/job_state.h"
#include "launcher/run_options.h"
#include "tests/support/test_support.h"
#include "worker/coordinator_client.h"

namespace mgpu {
namespace {

using mgpu::testing::BadInputMessage;

class CoordinatorService : public ::testing::Test {
 protected:
  CoordinatorService() : state_(4, 2, Template()), server_(state_, "127.0.0.1", 0, ServerSecurity{"s3cret", "", ""}) {
    stub_ = coordinator::Coordinator::NewStub(MakeCoordinatorChannel(server_.address(), ""));
  }

  static coordinator::Assignment Template() {
    coordinator::Assignment assignment;
    assignment.set_world_size(4);
    assignment.set_local_world_size(2);
    assignment.set_master_addr("127.0.0.1");
    assignment.set_master_port(29555);
    assignment.set_heartbeat_interval_ms(250);
    return assignment;
  }

  static coordinator::RegisterRequest Worker(int rank, int64_t pid) {
    coordinator::RegisterRequest request;
    request.set_host("host-a");
    request.set_pid(pid);
    request.set_rank(rank);
    request.set_local_rank(rank % 2);
    request.set_world_size(4);
    request.set_device("cpu");
    return request;
  }

  grpc::Status Register(const coordinator::RegisterRequest& request, const std::string& token,
                        coordinator::Assignment* assignment = nullptr) {
    grpc::ClientContext context;
    AddToken(context, token);
    coordinator::Assignment ignored;
    return stub_->Register(&context, request, assignment != nullptr ? assignment : &ignored);
  }

  JobState state_;
  CoordinatorServer server_;
  std::unique_ptr<coordinator::Coordinator::Stub> stub_;
};

TEST_F(CoordinatorService, RefusesCallsWithoutTheTokenOrWithAnother) {
  grpc::Status status = Register(Worker(0, 100), "");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(status.error_message().find("requires a token"), std::string::npos) << status.error_message();
  EXPECT_EQ(Register(Worker(0, 100), "guess").error_code(), grpc::StatusCode::UNAUTHENTICATED);

  grpc::ClientContext context;  // the streaming call is guarded too
  coordinator::ReportReply reply;
  auto writer = stub_->Report(&context, &reply);
  coordinator::WorkerReport report;
  writer->Write(report);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(state_.Ranks()[0].registered) << "a refused call changes nothing";
}

TEST_F(CoordinatorService, AssignsTheRankAndTheRendezvous) {
  coordinator::Assignment assignment;
  ASSERT_TRUE(Register(Worker(3, 200), "s3cret", &assignment).ok());
  EXPECT_EQ(assignment.rank(), 3);
  EXPECT_EQ(assignment.world_size(), 4);
  EXPECT_EQ(assignment.master_port(), 29555);
  EXPECT_EQ(assignment.heartbeat_interval_ms(), 250);
  EXPECT_TRUE(state_.Ranks()[3].registered);
  EXPECT_EQ(state_.Ranks()[3].pid, 200);
}

TEST_F(CoordinatorService, ValidatesWorkerInput) {
  ASSERT_TRUE(Register(Worker(1, 300), "s3cret").ok());
  grpc::Status duplicate = Register(Worker(1, 301), "s3cret");
  EXPECT_EQ(duplicate.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(duplicate.error_message().find("pid 300"), std::string::npos) << duplicate.error_message();
  EXPECT_TRUE(Register(Worker(1, 300), "s3cret").ok()) << "the same process may register again";

  grpc::Status out_of_range = Register(Worker(4, 400), "s3cret");
  EXPECT_EQ(out_of_range.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(out_of_range.error_message().find("ranks 0 to 3"), std::string::npos) << out_of_range.error_message();
  coordinator::RegisterRequest wrong_world = Worker(0, 500);
  wrong_world.set_world_size(8);
  EXPECT_EQ(Register(wrong_world, "s3cret").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  coordinator::RegisterRequest long_host = Worker(0, 500);
  long_host.set_host(std::string(1000, 'h'));
  EXPECT_EQ(Register(long_host, "s3cret").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  coordinator::RegisterRequest too_big = Worker(0, 500);
  too_big.set_device(std::string(2 << 20, 'd'));  // beyond the message size bound
  EXPECT_EQ(Register(too_big, "s3cret").error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(CoordinatorService, AReportStreamSpeaksForOneRegisteredRank) {
  ASSERT_TRUE(Register(Worker(2, 600), "s3cret").ok());
  grpc::ClientContext context;
  AddToken(context, "s3cret");
  coordinator::ReportReply reply;
  auto writer = stub_->Report(&context, &reply);
  coordinator::WorkerReport report;
  report.set_rank(2);
  report.set_step(7);
  report.set_phase("training");
  ASSERT_TRUE(writer->Write(report));
  report.set_rank(0);  // another rank on the same stream
  writer->Write(report);
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(state_.Ranks()[2].step, 7);
  EXPECT_EQ(state_.Ranks()[2].phase, "training");
}

TEST_F(CoordinatorService, AReportCarriesTheCollectiveARankWaitsInWithinItsSizeBound) {
  ASSERT_TRUE(Register(Worker(1, 601), "s3cret").ok());
  grpc::ClientContext context;
  AddToken(context, "s3cret");
  coordinator::ReportReply reply;
  auto writer = stub_->Report(&context, &reply);
  coordinator::WorkerReport report;
  report.set_rank(1);
  report.set_phase("training");
  report.set_pending_collective("all-reduce of gradient bucket 2 of 4 (1048576 bytes)");
  report.set_pending_collective_seconds(12.5);
  ASSERT_TRUE(writer->Write(report));
  report.set_pending_collective(std::string(257, 'c'));
  writer->Write(report);
  writer->WritesDone();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "at most 256 bytes";
  EXPECT_EQ(state_.Ranks()[1].pending_collective, "all-reduce of gradient bucket 2 of 4 (1048576 bytes)");
  EXPECT_EQ(state_.Ranks()[1].pending_collective_seconds, 12.5);
}

EnvLookup NoEnvironment() {
  return [](const char*) -> const char* { return nullptr; };
}

TEST(RunOptions, TakesTheLauncherFlagsAndPassesTheRestToWorkersInOrder) {
  const auto options = ParseRunOptions({"--nproc_per_node=3", "--mode", "ddp", "--tee", "--heartbeat-timeout", "5",
                                        "--lr", "0.1", "--max-restarts", "2"},
                                       NoEnvironment());
  ASSERT_TRUE(options.has_value());
  EXPECT_EQ(options->nproc_per_node, "3");
  EXPECT_TRUE(options->tee);
  EXPECT_EQ(options->heartbeat_timeout, 5);
  EXPECT_EQ(options->max_restarts, 2);
  EXPECT_EQ(options->worker_args, (std::vector<std::string>{"--mode", "ddp", "--lr", "0.1"}));
  EXPECT_FALSE(ParseRunOptions({"--help"}, NoEnvironment()).has_value());
}

TEST(RunOptions, ListeningBeyondLoopbackNeedsATokenOrTls) {
  const std::string message = BadInputMessage([] { ParseRunOptions({"--master-addr", "10.1.2.3"}, NoEnvironment()); });
  EXPECT_NE(message.find("--token"), std::string::npos) << message;
  EXPECT_TRUE(ParseRunOptions({"--master-addr", "10.1.2.3", "--token", "x"}, NoEnvironment()).has_value());
  const EnvLookup with_token = [](const char* name) -> const char* {
    return std::string(name) == "MGPU_TOKEN" ? "from-env" : nullptr;
  };
  EXPECT_EQ(ParseRunOptions({"--master-addr", "10.1.2.3"}, with_token)->token, "from-env");
}

TEST(RunOptions, RefusesBadValuesAndFlagsThatAreTheLaunchers) {
  EXPECT_NE(BadInputMessage([] { ParseRunOptions({"--nproc-per-node", "0"}, NoEnvironment()); }).find("--nproc-per-node"),
            std::string::npos);
  EXPECT_NE(BadInputMessage([] { ParseRunOptions({"--nnodes", "2", "--node-rank", "2"}, NoEnvironment()); })
                .find("--node-rank 2 is out of range"),
            std::string::npos);
  EXPECT_NE(BadInputMessage([] { ParseRunOptions({"--rank", "1"}, NoEnvironment()); }).find("set by mgpu run"),
            std::string::npos);
  EXPECT_NE(BadInputMessage([] { ParseRunOptions({"--tls-cert", "c.pem"}, NoEnvironment()); }).find("--tls-key"),
            std::string::npos);
}

}  // namespace
}  // namespace mgpu
