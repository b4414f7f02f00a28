// `mgpu run` end to end on the CPU (gloo): it trains and reports every rank; a failure stops the
// job naming the rank that caused it with no worker left behind, the workers of a stopped
// launcher end by themselves, or a failure restarts the group with
// --max-restarts; a hung rank is reported within the heartbeat timeout, with the collective the
// other ranks wait in; the coordinator serves over TLS and an untrusted certificate is a clear
// error; a taken port and a bad configuration fail before any worker starts; two launchers
// (--nnodes 2) run one 4-rank job.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/support/test_support.h"

#include "tests/support/worker_logs.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;
using Clock = std::chrono::steady_clock;

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

bool ProcessGone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override { WriteTinyMnistLike(data_.path(), 640, 200); }

  // `mgpu run` with the given launcher flags and a small CPU DDP job writing into out_/name.
  std::vector<std::string> Command(const std::string& name, std::vector<std::string> launcher,
                                   std::vector<std::string> worker = {}) {
    std::vector<std::string> argv = {MGPU_LAUNCHER_BIN, "run"};
    argv.insert(argv.end(), launcher.begin(), launcher.end());
    for (const char* flag : {"--mode", "ddp", "--device", "cpu", "--threads", "1", "--batch-size", "32", "--log-every", "1"}) {
      argv.push_back(flag);
    }
    argv.insert(argv.end(), {"--data-dir", data_.path(), "--out", out_ / name});
    argv.insert(argv.end(), worker.begin(), worker.end());
    return argv;
  }

  TempDir data_;
  TempDir out_;
};

TEST_F(RunCli, TwoWorkersWithoutModeDdpAreExitTwoSayingWhyTheModeIsNotInferred) {
  const CommandResult result = RunCommand({MGPU_LAUNCHER_BIN, "run", "--nproc-per-node", "2", "--device", "cpu",
                                           "--data-dir", data_.path(), "--out", out_ / "single"});
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("pass --mode ddp"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("the mode is not inferred: --mode single asks for one process"), std::string::npos)
      << result.output;
  EXPECT_FALSE(PathExists(out_ / "single"));
}

TEST_F(RunCli, TrainsWithTwoRanksAndReportsBoth) {
  CommandResult result = RunCommand(Command("job", {"--nproc-per-node", "2", "--tee"}, {"--max-steps", "6"}));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "job");
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["steps"], 6);
  const nlohmann::json& launcher = summary["launcher"];
  EXPECT_EQ(launcher["exit_code"], 0);
  EXPECT_EQ(launcher["attempts"], 1);
  EXPECT_GT(launcher["world_images_per_second"].get<double>(), 0);
  ASSERT_EQ(launcher["ranks"].size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json& entry = launcher["ranks"][rank];
    EXPECT_EQ(entry["rank"], rank);
    EXPECT_EQ(entry["exit_code"], 0);
    EXPECT_EQ(entry["steps"], 6);
    EXPECT_GT(entry["seconds"].get<double>(), 0);
    EXPECT_TRUE(PathExists(out_ / ("job/logs/rank-" + std::to_string(rank) + ".console.log")));
    EXPECT_TRUE(PathExists(out_ / ("job/logs/rank-" + std::to_string(rank) + ".log")));
  }
  EXPECT_NE(result.output.find("[rank 1] "), std::string::npos) << "--tee shows every rank: " << result.output;
  EXPECT_NE(result.output.find("all 2 rank(s) finished"), std::string::npos) << result.output;
}

TEST_F(RunCli, AKilledWorkerStopsTheJobNamingItsRankWithNoWorkerLeft) {
  BackgroundCommand job(Command("killed", {"--nproc-per-node", "2"}, {"--epochs", "100000"}));
  const std::string logs = out_ / "killed/logs";
  pid_t victim = -1, survivor = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        victim = LoggedPid(logs + "/rank-1.log");
        survivor = LoggedPid(logs + "/rank-0.log");
        return victim > 0 && survivor > 0 && LineCount(out_ / "killed/metrics.csv") > 3;
      },
      60))
      << "the job did not start training";
  ::kill(victim, SIGKILL);
  const auto killed_at = Clock::now();
  CommandResult result = job.Wait();
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  EXPECT_LT(seconds, 10) << result.output;
  EXPECT_EQ(result.exit_code, 128 + SIGKILL) << result.output;
  EXPECT_NE(result.output.find("rank 1 (host"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("SIGKILL"), std::string::npos) << result.output;
  EXPECT_TRUE(ProcessGone(survivor)) << "rank 0 (pid " << survivor << ") outlived the job";
  EXPECT_TRUE(ProcessGone(victim));
  const nlohmann::json summary = ReadSummary(out_ / "killed");
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["launcher"]["root_cause"]["rank"], 1);
  EXPECT_EQ(summary["launcher"]["root_cause"]["signal"], SIGKILL);
}

// The parent process id of `pid` (field 4 of /proc/PID/stat), or -1.
pid_t ParentOf(pid_t pid) {
  const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return -1;
  char state = 0;
  int parent = -1;
  return std::sscanf(stat.c_str() + name_end + 1, " %c %d", &state, &parent) == 2 ? parent : -1;
}

TEST_F(RunCli, InterruptingTheLauncherStopsEveryWorker) {
  BackgroundCommand job(Command("interrupted", {"--nproc-per-node", "2"}, {"--epochs", "100000"}));
  const std::string logs = out_ / "interrupted/logs";
  pid_t rank0 = -1, rank1 = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        rank0 = LoggedPid(logs + "/rank-0.log");
        rank1 = LoggedPid(logs + "/rank-1.log");
        return rank0 > 0 && rank1 > 0 && LineCount(out_ / "interrupted/metrics.csv") > 1;
      },
      60));
  const pid_t launcher = ParentOf(rank0);
  ASSERT_GT(launcher, 1);
  ::kill(launcher, SIGINT);
  CommandResult result = job.Wait();
  EXPECT_EQ(result.exit_code, 128 + SIGINT) << result.output;
  EXPECT_NE(result.output.find("interrupted by SIGINT"), std::string::npos) << result.output;
  EXPECT_TRUE(ProcessGone(rank0));
  EXPECT_TRUE(ProcessGone(rank1));
  EXPECT_EQ(ReadSummary(out_ / "interrupted")["launcher"]["root_cause"]["kind"], "interrupted");
}

// Whether `pid` has ended: gone, or a zombie its (stopped) parent has not reaped.
bool ProcessEnded(pid_t pid) {
  if (ProcessGone(pid)) return true;
  const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  const size_t name_end = stat.rfind(')');
  return name_end == std::string::npos || stat.compare(name_end + 1, 3, " Z ") == 0 ||
         stat.compare(name_end + 1, 3, " X ") == 0;
}

// How a zombie `pid` ended, from its wait status (field 52 of /proc/PID/stat, kept until its
// parent reaps it): "exit code N", "signal N", or "unknown" once it is gone.
std::string HowZombieEnded(pid_t pid) {
  const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return "unknown";
  std::istringstream fields(stat.substr(name_end + 2));  // field 3 (the state) onwards
  std::string field;
  for (int index = 3; index <= 52 && fields >> field; ++index) {
    if (index < 52) continue;
    const int wait_status = std::atoi(field.c_str());
    if (WIFSIGNALED(wait_status)) return "signal " + std::to_string(WTERMSIG(wait_status));
    return "exit code " + std::to_string(WEXITSTATUS(wait_status));
  }
  return "unknown";
}

TEST_F(RunCli, WorkersOfAStoppedLauncherEndByThemselvesAfterTheHeartbeatTimeout) {
  // One metrics row per epoch keeps the workers' output far below what the stopped launcher's
  // pipes hold, so it cannot block them.
  std::vector<std::string> argv =
      Command("orphaned", {"--nproc-per-node", "2", "--heartbeat-timeout", "3"}, {"--epochs", "100000"});
  *(std::find(argv.begin(), argv.end(), "--log-every") + 1) = "1000000";
  BackgroundCommand job(argv, {}, ProcessGroup::kOwn);  // it gets stopped (test_support.h)
  const std::string logs = out_ / "orphaned/logs";
  pid_t rank0 = -1, rank1 = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        rank0 = LoggedPid(logs + "/rank-0.log");
        rank1 = LoggedPid(logs + "/rank-1.log");
        return rank0 > 0 && rank1 > 0 && LineCount(out_ / "orphaned/metrics.csv") > 2;
      },
      60))
      << "the job did not start training";
  const pid_t launcher = ParentOf(rank0);
  ASSERT_GT(launcher, 1);
  ::kill(launcher, SIGSTOP);
  // The bound: the 3 s heartbeat timeout, then the next step (or 10 s more for a stuck worker);
  // the deadline here only allows for a busy machine.
  const bool ended = WaitFor([&] { return ProcessEnded(rank0) && ProcessEnded(rank1); }, 90);
  // Read while the stopped launcher cannot reap them.
  const std::string how = "rank 0: " + HowZombieEnded(rank0) + ", rank 1: " + HowZombieEnded(rank1);
  ::kill(launcher, SIGKILL);
  ::kill(launcher, SIGCONT);
  job.Wait();
  ASSERT_TRUE(ended) << "the workers of a stopped launcher went on";
  const std::string said = ReadText(logs + "/rank-0.log") + ReadText(logs + "/rank-1.log");
  ASSERT_TRUE(PathExists(out_ / "orphaned/summary.json"))
      << "rank 0 ended without writing summary.json (" << how << "); the ranks' logs:\n" << said;
  EXPECT_EQ(how, "rank 0: exit code 1, rank 1: exit code 1") << said;
  const nlohmann::json summary = ReadSummary(out_ / "orphaned");
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["exit_code"], 1);
  // The rank that noticed first says why; the other may fail first on its collective with it.
  EXPECT_NE(said.find("the launcher (mgpu run, coordinator at"), std::string::npos) << said;
  EXPECT_NE(said.find("stopped answering"), std::string::npos) << said;
}

TEST_F(RunCli, MaxRestartsStartsTheWholeGroupAgainAfterAFailure) {
  BackgroundCommand job(Command("restarted", {"--nproc-per-node", "2", "--max-restarts", "1"},
                                {"--epochs", "100000", "--max-steps", "300"}));
  const std::string logs = out_ / "restarted/logs";
  pid_t victim = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        victim = LoggedPid(logs + "/rank-1.log");
        return victim > 0 && LineCount(out_ / "restarted/metrics.csv") > 3;
      },
      60))
      << "the job did not start training";
  ::kill(victim, SIGKILL);
  CommandResult result = job.Wait();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("restarting the whole group (restart 1 of 1)"), std::string::npos) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "restarted");
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_EQ(summary["steps"], 300);
  EXPECT_EQ(summary["launcher"]["attempts"], 2);
}

TEST_F(RunCli, AHungWorkerIsReportedWithinTheHeartbeatTimeout) {
  const auto start = Clock::now();
  CommandResult result = RunCommand(Command("hung", {"--nproc-per-node", "2", "--heartbeat-timeout", "3"}, {"--epochs", "100000"}),
                                    {"MGPU_TEST_FAULTS=hang-at-step=3"});
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_LT(seconds, 30) << result.output;
  EXPECT_NE(result.output.find("hung"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 1 ("), std::string::npos) << "every rank's position: " << result.output;
  EXPECT_NE(result.output.find("step 3, epoch 0, training"), std::string::npos) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "hung");
  EXPECT_EQ(summary["launcher"]["root_cause"]["kind"], "hung");
  EXPECT_EQ(summary["launcher"]["root_cause"]["step"], 3);
}

TEST_F(RunCli, AHangReportNamesTheCollectiveTheOtherRanksWaitIn) {
  // Rank 1 stops after step 3; rank 0 goes on to step 4's gradient all-reduce and waits there.
  CommandResult result = RunCommand(Command("waiting", {"--nproc-per-node", "2", "--heartbeat-timeout", "3"}, {"--epochs", "100000"}),
                                    {"MGPU_TEST_FAULTS=hang-at-step=3,hang-rank=1"});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(std::regex_search(result.output, std::regex(R"(rank 0 \([^)]*\): step 3, epoch 0, training, )"
                                                          R"(waiting in all-reduce of gradient bucket \d+)")))
      << "rank 0 must say which collective it waits in: " << result.output;
  EXPECT_NE(result.output.find("rank 1 ("), std::string::npos) << result.output;
  const nlohmann::json summary = ReadSummary(out_ / "waiting");
  EXPECT_EQ(summary["launcher"]["root_cause"]["kind"], "hung");
  EXPECT_EQ(summary["launcher"]["root_cause"]["rank"], 1) << "the rank the others wait for is the cause";
}

// A self-signed certificate for 127.0.0.1 (its own CA), made with the openssl tool (scripts/setup.sh
// installs it): DIR/NAME.pem and DIR/NAME.key.
CommandResult MakeCertificate(const std::string& dir, const std::string& name) {
  return RunCommand({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=mgpu-test",
                     "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", dir + "/" + name + ".key",
                     "-out", dir + "/" + name + ".pem"});
}

TEST_F(RunCli, ServesTheCoordinatorOverTlsAndWorkersThatDoNotTrustItSayWhy) {
  TempDir certs;
  const std::string dir = certs.path();
  for (const char* name : {"coordinator", "stranger"}) {
    const CommandResult made = MakeCertificate(dir, name);
    ASSERT_EQ(made.exit_code, 0) << "openssl (scripts/setup.sh installs it): " << made.output;
  }
  const std::vector<std::string> tls = {"--tls-cert", dir + "/coordinator.pem", "--tls-key", dir + "/coordinator.key"};
  std::vector<std::string> trusted = {"--nproc-per-node", "2", "--tls-ca", dir + "/coordinator.pem"};
  trusted.insert(trusted.end(), tls.begin(), tls.end());
  const CommandResult ok = RunCommand(Command("tls", trusted, {"--max-steps", "3"}));
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ReadSummary(out_ / "tls")["launcher"]["world_size"], 2);

  std::vector<std::string> untrusted = {"--nproc-per-node", "1", "--tls-ca", dir + "/stranger.pem"};
  untrusted.insert(untrusted.end(), tls.begin(), tls.end());
  const CommandResult refused = RunCommand(Command("untrusted", untrusted, {"--max-steps", "3"}));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("--tls-ca"), std::string::npos) << "the error must point at the CA: " << refused.output;
}

// The "intra-op threads" row of rank 0's start-up table, or -1.
int IntraOpThreads(const std::string& output) {
  std::smatch match;
  if (!std::regex_search(output, match, std::regex(R"(intra-op threads\s*\|\s*(\d+))"))) return -1;
  return std::stoi(match[1]);
}

TEST_F(RunCli, WorkersShareTheNodesCoresUnlessOmpNumThreadsIsSet) {
  // The worker flags here pass --threads 1; without it each worker takes LibTorch's default.
  std::vector<std::string> argv = Command("shared", {"--nproc-per-node", "2"}, {"--max-steps", "2"});
  argv.erase(std::find(argv.begin(), argv.end(), "--threads"), std::find(argv.begin(), argv.end(), "--threads") + 2);
  const char* preset = std::getenv("OMP_NUM_THREADS");
  const int expected = preset != nullptr && *preset != '\0'
                           ? std::atoi(preset)
                           : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  CommandResult shared = RunCommand(argv);
  ASSERT_EQ(shared.exit_code, 0) << shared.output;
  EXPECT_EQ(IntraOpThreads(shared.output), expected) << shared.output;
  argv.push_back("--overwrite");  // the same folder again
  CommandResult chosen = RunCommand(argv, {"OMP_NUM_THREADS=1"});
  ASSERT_EQ(chosen.exit_code, 0) << chosen.output;
  EXPECT_EQ(IntraOpThreads(chosen.output), 1) << "the user's OMP_NUM_THREADS wins: " << chosen.output;
}

TEST_F(RunCli, MissingDataIsExitTwoNamingTheFolderNotACrash) {
  std::vector<std::string> argv = Command("nodata", {"--nproc-per-node", "2"}, {"--max-steps", "2"});
  *(std::find(argv.begin(), argv.end(), "--data-dir") + 1) = data_ / "absent";
  CommandResult result = RunCommand(argv);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find(data_ / "absent"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("terminate called"), std::string::npos) << result.output;
  EXPECT_EQ(ReadSummary(out_ / "nodata")["status"], "failed");
}

TEST_F(RunCli, ATakenMasterPortIsAClearErrorBeforeAnyWorkerStarts) {
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(holder, 1), 0);
  socklen_t length = sizeof(address);
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string port = std::to_string(ntohs(address.sin_port));
  CommandResult result = RunCommand(Command("port", {"--nproc-per-node", "2", "--master-port", port}, {"--max-steps", "2"}));
  ::close(holder);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("127.0.0.1:" + port), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("--master-port"), std::string::npos) << result.output;
  EXPECT_FALSE(PathExists(out_ / "port/logs/rank-0.console.log")) << "no worker may start";
}

TEST_F(RunCli, ABadWorkerConfigurationFailsBeforeAnyWorkerStarts) {
  CommandResult result = RunCommand(Command("bad", {"--nproc-per-node", "2"}, {"--batch-size", "0"}));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--batch-size"), std::string::npos) << result.output;
  EXPECT_FALSE(PathExists(out_ / "bad/logs/rank-0.console.log")) << "no worker may start";
  CommandResult single = RunCommand(Command("single", {"--nproc-per-node", "2"}, {"--mode", "single"}));
  EXPECT_EQ(single.exit_code, 2) << single.output;
  EXPECT_NE(single.output.find("--mode ddp"), std::string::npos) << single.output;
}

TEST_F(RunCli, TwoLaunchersRunOneFourRankJob) {
  const std::string master_port = std::to_string(FreeLocalPort());
  const std::string coordinator_port = std::to_string(FreeLocalPort());
  auto node = [&](int rank) {
    return Command("nodes", {"--nnodes", "2", "--node-rank", std::to_string(rank), "--nproc-per-node", "2",
                             "--master-port", master_port, "--coordinator-port", coordinator_port, "--heartbeat-timeout", "30"},
                   {"--max-steps", "4"});
  };
  BackgroundCommand node1(node(1));
  CommandResult node0 = RunCommand(node(0));
  CommandResult other = node1.Wait();
  ASSERT_EQ(node0.exit_code, 0) << node0.output << "\n--- node 1:\n" << other.output;
  EXPECT_EQ(other.exit_code, 0) << other.output;
  const nlohmann::json summary = ReadSummary(out_ / "nodes");
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_EQ(summary["world_size"], 4);
  ASSERT_EQ(summary["rank_param_checksums"].size(), 4u);
  for (int rank = 1; rank < 4; ++rank) EXPECT_EQ(summary["rank_param_checksums"][rank], summary["rank_param_checksums"][0]);
  ASSERT_EQ(summary["launcher"]["ranks"].size(), 4u);
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(summary["launcher"]["ranks"][rank]["exit_code"], 0) << rank;
  EXPECT_EQ(summary["launcher"]["nnodes"], 2);
}

}  // namespace
}  // namespace mgpu
