// The coordinator service over a real gRPC channel: the token is checked on every RPC, and
// worker input is validated (ranks in range, one registration per rank, sizes bounded). The
// worker's client gives up on a launcher that stops answering, and never waits for it for ever.
// Also `mgpu run`'s own flags: what is the launcher's, what goes to the workers, and what is unsafe.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "coordinator/coordinator.grpc.pb.h"
#include "launcher/run/coordinator_server.h"
#include "launcher/run/job_state.h"
#include "launcher/run/run_options.h"
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

  grpc::Status Heartbeat(const coordinator::WorkerReport& report, const std::string& token) {
    grpc::ClientContext context;
    AddToken(context, token);
    coordinator::HeartbeatReply reply;
    return stub_->Heartbeat(&context, report, &reply);
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

  coordinator::WorkerReport report;  // heartbeats are guarded too
  EXPECT_EQ(Heartbeat(report, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
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

TEST_F(CoordinatorService, AHeartbeatSpeaksForARegisteredRank) {
  ASSERT_TRUE(Register(Worker(2, 600), "s3cret").ok());
  coordinator::WorkerReport report;
  report.set_rank(2);
  report.set_step(7);
  report.set_phase("training");
  ASSERT_TRUE(Heartbeat(report, "s3cret").ok());
  EXPECT_EQ(state_.Ranks()[2].step, 7);
  EXPECT_EQ(state_.Ranks()[2].phase, "training");
  report.set_rank(0);
  EXPECT_EQ(Heartbeat(report, "s3cret").error_code(), grpc::StatusCode::FAILED_PRECONDITION) << "rank 0 never registered";
  report.set_rank(4);
  EXPECT_EQ(Heartbeat(report, "s3cret").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(CoordinatorService, AHeartbeatCarriesTheCollectiveARankWaitsInWithinItsSizeBound) {
  ASSERT_TRUE(Register(Worker(1, 601), "s3cret").ok());
  coordinator::WorkerReport report;
  report.set_rank(1);
  report.set_phase("training");
  report.set_pending_collective("all-reduce of gradient bucket 2 of 4 (1048576 bytes)");
  report.set_pending_collective_seconds(12.5);
  ASSERT_TRUE(Heartbeat(report, "s3cret").ok());
  report.set_pending_collective(std::string(257, 'c'));
  EXPECT_EQ(Heartbeat(report, "s3cret").error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "at most 256 bytes";
  EXPECT_EQ(state_.Ranks()[1].pending_collective, "all-reduce of gradient bucket 2 of 4 (1048576 bytes)");
  EXPECT_EQ(state_.Ranks()[1].pending_collective_seconds, 12.5);
}

// A coordinator that answers until StopAnswering(), then holds every heartbeat and finish call
// unanswered, as a SIGSTOPped launcher does. Held calls are released when it is destroyed.
class SilentCoordinator : public coordinator::Coordinator::CallbackService {
 public:
  ~SilentCoordinator() override { Release(); }

  void StopAnswering() { silent_ = true; }
  int heartbeats() const { return heartbeats_; }
  int finishes() const { return finishes_; }
  // Answers the held calls (their clients gave up long ago); before the server shuts down.
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (grpc::ServerUnaryReactor* reactor : held_) reactor->Finish(grpc::Status::CANCELLED);
    held_.clear();
  }

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context, const coordinator::RegisterRequest* request,
                                     coordinator::Assignment* assignment) override {
    assignment->set_rank(request->rank());
    assignment->set_world_size(request->world_size());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context, const coordinator::WorkerReport*,
                                      coordinator::HeartbeatReply*) override {
    ++heartbeats_;
    return AnswerUnlessSilent(context);
  }
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const coordinator::FinishRequest*,
                                   coordinator::FinishReply*) override {
    ++finishes_;
    return AnswerUnlessSilent(context);
  }

 private:
  grpc::ServerUnaryReactor* AnswerUnlessSilent(grpc::CallbackServerContext* context) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (!silent_) {
      reactor->Finish(grpc::Status::OK);
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      held_.push_back(reactor);
    }
    return reactor;
  }

  std::atomic<bool> silent_{false};
  std::atomic<int> heartbeats_{0};
  std::atomic<int> finishes_{0};
  std::mutex mutex_;
  std::vector<grpc::ServerUnaryReactor*> held_;
};

class CoordinatorClientTest : public ::testing::Test {
 protected:
  CoordinatorClientTest() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&coordinator_);
    server_ = builder.BuildAndStart();
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  ~CoordinatorClientTest() override {
    coordinator_.Release();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  // A client registered as rank 0 of 1.
  std::unique_ptr<CoordinatorClient> RegisteredClient() {
    auto client = std::make_unique<CoordinatorClient>(address_, "", "");
    WorldInfo world;
    world.rank = 0;
    world.world_size = 1;
    client->Register(world, "cpu");
    return client;
  }

  static double SecondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  SilentCoordinator coordinator_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(CoordinatorClientTest, AWorkerWhoseLauncherStopsAnsweringIsToldToStopAfterTheTimeout) {
  std::unique_ptr<CoordinatorClient> client = RegisteredClient();
  std::mutex mutex;
  std::string reason;
  client->StartHeartbeats(std::chrono::milliseconds(100), std::chrono::milliseconds(1000), [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex);
    reason = why;
  });
  ASSERT_TRUE(mgpu::testing::WaitFor([&] { return coordinator_.heartbeats() >= 2; }, 30)) << "heartbeats flow";
  coordinator_.StopAnswering();
  const auto silenced = std::chrono::steady_clock::now();
  auto told = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return !reason.empty();
  };
  // Finish must come within CoordinatorClient::kExitGrace of the verdict, or the process ends.
  ASSERT_TRUE(mgpu::testing::WaitFor(told, 30)) << "no verdict on a silent launcher";
  EXPECT_GE(SecondsSince(silenced), 0.9) << "not before the launcher timeout";
  const auto finishing = std::chrono::steady_clock::now();
  client->Finish(coordinator::FinishRequest());
  EXPECT_LT(SecondsSince(finishing), 1) << "a lost launcher is not called again";
  EXPECT_EQ(coordinator_.finishes(), 0);
  EXPECT_NE(reason.find("stopped answering"), std::string::npos) << reason;
  EXPECT_NE(reason.find(address_), std::string::npos) << reason;
}

TEST_F(CoordinatorClientTest, FinishReturnsWithinItsBoundWhenTheLauncherStopsAnsweringFirst) {
  std::unique_ptr<CoordinatorClient> client = RegisteredClient();
  std::atomic<bool> told{false};
  client->StartHeartbeats(std::chrono::milliseconds(100), std::chrono::seconds(600),
                          [&](const std::string&) { told = true; });
  ASSERT_TRUE(mgpu::testing::WaitFor([&] { return coordinator_.heartbeats() >= 2; }, 30)) << "heartbeats flow";
  coordinator_.StopAnswering();
  const auto finishing = std::chrono::steady_clock::now();
  coordinator::FinishRequest outcome;
  outcome.set_exit_code(1);
  client->Finish(outcome);
  const double bound = 2.0 * CoordinatorClient::kFinishDeadline.count();
  EXPECT_LT(SecondsSince(finishing), bound + 5) << "Finish must not wait for a silent launcher beyond its deadlines";
  EXPECT_FALSE(told);
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
