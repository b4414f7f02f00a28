// `mgpu run` across hosts, without Docker: two network namespaces joined by a veth pair
// (10.77.0.1/24 and 10.77.0.2/24) stand for two hosts, one launcher runs in each, and a CPU Gloo
// DDP job trains across them to the same parameters as the same job on one host. With one
// host's network cut mid-run, every launcher exits non-zero within the heartbeat timeout (plus
// the stop grace), naming the node it lost. Needs root and iproute2; skipped, saying why,
// where namespaces cannot be made.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;
using Clock = std::chrono::steady_clock;

constexpr const char* kNode0Address = "10.77.0.1";
constexpr const char* kNode1Address = "10.77.0.2";
constexpr const char* kToken = "netns-test-secret";
constexpr double kHeartbeatTimeout = 5;
constexpr double kStopGrace = 3;  // the launcher's SIGTERM-to-SIGKILL grace for a worker

std::string IpCommand() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return "";
}

// Two namespaces "hosts" joined by one veth pair; removed (with the pair) on destruction.
class TwoHosts {
 public:
  // Returns nullptr, with `why` set, where namespaces cannot be made here.
  static std::unique_ptr<TwoHosts> Create(std::string& why) {
    if (::geteuid() != 0) {
      why = "network namespaces need root (run the test as root, or in a container with CAP_NET_ADMIN)";
      return nullptr;
    }
    const std::string ip = IpCommand();
    if (ip.empty()) {
      why = "no `ip` command (iproute2) in /usr/sbin, /sbin, /usr/bin or /bin";
      return nullptr;
    }
    static std::atomic<int> counter{0};
    const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
    auto hosts = std::unique_ptr<TwoHosts>(new TwoHosts(ip, tag));
    why = hosts->Build();
    if (!why.empty()) return nullptr;
    return hosts;
  }

  ~TwoHosts() {
    for (const auto& name : created_) RunCommand({ip_, "netns", "del", name});
  }

  const std::string& ns(int node) const { return names_[node]; }
  const std::string& veth(int node) const { return veths_[node]; }

  // `argv` run inside node's namespace.
  std::vector<std::string> In(int node, const std::vector<std::string>& argv) const {
    std::vector<std::string> wrapped = {ip_, "netns", "exec", names_[node]};
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return wrapped;
  }

  // Takes node's end of the link down: both hosts lose each other at once.
  CommandResult Cut(int node) const { return RunCommand({ip_, "-n", names_[node], "link", "set", veths_[node], "down"}); }

 private:
  TwoHosts(std::string ip, const std::string& tag)
      : ip_(std::move(ip)),
        names_{"mgpu-" + tag + "-a", "mgpu-" + tag + "-b"},
        // Interface names are at most 15 bytes; the pid and counter keep them unique.
        veths_{"mv" + tag.substr(0, 10) + "a", "mv" + tag.substr(0, 10) + "b"} {}

  // Returns "" or what failed.
  std::string Build() {
    for (const auto& name : names_) {
      CommandResult added = RunCommand({ip_, "netns", "add", name});
      if (added.exit_code != 0) return "`ip netns add " + name + "` failed: " + added.output;
      created_.push_back(name);
    }
    const std::vector<std::vector<std::string>> steps = {
        {ip_, "link", "add", veths_[0], "netns", names_[0], "type", "veth", "peer", "name", veths_[1], "netns", names_[1]},
        {ip_, "-n", names_[0], "addr", "add", std::string(kNode0Address) + "/24", "dev", veths_[0]},
        {ip_, "-n", names_[1], "addr", "add", std::string(kNode1Address) + "/24", "dev", veths_[1]},
        {ip_, "-n", names_[0], "link", "set", veths_[0], "up"},
        {ip_, "-n", names_[1], "link", "set", veths_[1], "up"},
        {ip_, "-n", names_[0], "link", "set", "lo", "up"},
        {ip_, "-n", names_[1], "link", "set", "lo", "up"},
    };
    for (const auto& step : steps) {
      CommandResult result = RunCommand(step);
      if (result.exit_code != 0) {
        std::string command;
        for (const auto& arg : step) command += (command.empty() ? "" : " ") + arg;
        return "`" + command + "` failed: " + result.output;
      }
    }
    // The veth pair needs a moment to come up (carrier, duplicate address detection).
    const bool reachable = WaitFor(
        [&] { return RunCommand(In(1, {ip_, "route", "get", kNode0Address})).exit_code == 0; }, 5);
    return reachable ? "" : "node 1 has no route to " + std::string(kNode0Address) + " after 5 s";
  }

  std::string ip_;
  std::string names_[2];
  std::string veths_[2];
  std::vector<std::string> created_;
};

class NetnsCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    hosts_ = TwoHosts::Create(why);
    if (!hosts_) {
      std::fprintf(stderr, "skipping the multi-host tests: %s\n", why.c_str());
      GTEST_SKIP() << why;
    }
    WriteTinyMnistLike(data_.path(), 640, 200);
  }

  // `mgpu run` with launcher flags and a small CPU Gloo DDP job writing into out_/name.
  std::vector<std::string> Command(const std::string& name, std::vector<std::string> launcher,
                                   std::vector<std::string> worker) {
    std::vector<std::string> argv = {MGPU_LAUNCHER_BIN, "run"};
    argv.insert(argv.end(), launcher.begin(), launcher.end());
    for (const char* flag : {"--mode", "ddp", "--backend", "gloo", "--device", "cpu", "--model", "lenet", "--threads",
                             "1", "--batch-size", "32", "--log-every", "1", "--seed", "7"}) {
      argv.push_back(flag);
    }
    argv.insert(argv.end(), {"--data-dir", data_.path(), "--out", out_ / name});
    argv.insert(argv.end(), worker.begin(), worker.end());
    return argv;
  }

  // Node `node` of a 2-node, 1-worker-per-node job, inside its namespace.
  std::vector<std::string> Node(int node, const std::string& name, std::vector<std::string> worker) {
    return hosts_->In(node, Command(name,
                                    {"--nnodes", "2", "--node-rank", std::to_string(node), "--nproc-per-node", "1",
                                     "--master-addr", kNode0Address, "--master-port", "29500", "--token", kToken,
                                     "--heartbeat-timeout", std::to_string(static_cast<int>(kHeartbeatTimeout))},
                                    worker));
  }

  std::unique_ptr<TwoHosts> hosts_;
  TempDir data_;
  TempDir out_;
};

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

TEST_F(NetnsCluster, TwoHostsTrainToTheSameParametersAsOneHost) {
  const std::vector<std::string> worker = {"--max-steps", "8"};
  BackgroundCommand node1(Node(1, "two-hosts", worker));
  CommandResult node0 = RunCommand(Node(0, "two-hosts", worker));
  CommandResult other = node1.Wait();
  ASSERT_EQ(node0.exit_code, 0) << node0.output << "\n--- node 1:\n" << other.output;
  ASSERT_EQ(other.exit_code, 0) << other.output;
  const nlohmann::json across = ReadSummary(out_ / "two-hosts");
  EXPECT_EQ(across["status"], "ok");
  EXPECT_EQ(across["world_size"], 2);
  EXPECT_EQ(across["launcher"]["nnodes"], 2);
  EXPECT_EQ(across["steps"], 8);
  // Rank 1 really ran on the other host: it reached the coordinator from node 1's address.
  const std::string rank1_log = ReadText(out_ / "two-hosts/logs/rank-1.log");
  EXPECT_NE(rank1_log.find(std::string("bound to ") + kNode1Address), std::string::npos)
      << "rank 1's gloo device should bind node 1's address:\n" << rank1_log;

  CommandResult one_host = RunCommand(Command("one-host", {"--nproc-per-node", "2"}, worker));
  ASSERT_EQ(one_host.exit_code, 0) << one_host.output;
  const nlohmann::json local = ReadSummary(out_ / "one-host");
  EXPECT_EQ(local["world_size"], 2);
  EXPECT_EQ(local["steps"], 8);
  EXPECT_EQ(across["param_checksum"], local["param_checksum"]) << "two hosts and one host must train alike";
  ASSERT_EQ(across["rank_param_checksums"].size(), 2u);
  EXPECT_EQ(across["rank_param_checksums"][0], across["rank_param_checksums"][1]);
  EXPECT_EQ(ReadText(out_ / "two-hosts/model_state_dict.pt"), ReadText(out_ / "one-host/model_state_dict.pt"));
}

TEST_F(NetnsCluster, CuttingOneHostsNetworkStopsEveryLauncherNamingTheLostNode) {
  const std::vector<std::string> worker = {"--epochs", "100000"};
  BackgroundCommand node1(Node(1, "cut", worker));
  BackgroundCommand node0(Node(0, "cut", worker));
  ASSERT_TRUE(WaitFor([&] { return LineCount(out_ / "cut/metrics.csv") > 3; }, 60))
      << "the two-host job did not start training";
  // Heartbeats come once a second: let both ranks report training steps before the cut.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CommandResult cut = hosts_->Cut(1);
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  const auto cut_at = Clock::now();
  // Both wait concurrently; each launcher's own exit time is what counts.
  double seconds[2] = {0, 0};
  CommandResult results[2];
  std::thread wait1([&] {
    results[1] = node1.Wait();
    seconds[1] = std::chrono::duration<double>(Clock::now() - cut_at).count();
  });
  results[0] = node0.Wait();
  seconds[0] = std::chrono::duration<double>(Clock::now() - cut_at).count();
  wait1.join();

  const double limit = kHeartbeatTimeout + kStopGrace + 3;  // 3 s for polling and reporting
  for (int node = 0; node < 2; ++node) {
    std::fprintf(stderr, "node %d exited %d, %.1f s after the cut; its launcher's lines:\n", node,
                 results[node].exit_code, seconds[node]);
    std::istringstream lines(results[node].output);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("mgpu run:", 0) == 0) std::fprintf(stderr, "  %s\n", line.c_str());
    }
  }
  for (int node = 0; node < 2; ++node) {
    EXPECT_NE(results[node].exit_code, 0) << "node " << node << ":\n" << results[node].output;
    EXPECT_LT(seconds[node], limit) << "node " << node << " took " << seconds[node] << " s after the cut:\n"
                                    << results[node].output;
  }
  EXPECT_NE(results[0].output.find("node 1 (host"), std::string::npos) << results[0].output;
  EXPECT_NE(results[0].output.find("lost"), std::string::npos) << results[0].output;
  EXPECT_NE(results[1].output.find("node 1 lost node 0"), std::string::npos) << results[1].output;
  const nlohmann::json summary = ReadSummary(out_ / "cut");
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["launcher"]["root_cause"]["kind"], "node-lost") << summary["launcher"].dump(2);
  EXPECT_EQ(summary["launcher"]["root_cause"]["rank"], 1) << summary["launcher"].dump(2);
}

}  // namespace
}  // namespace mgpu
