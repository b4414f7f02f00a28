// `mgpu run` across containers: the image of docker/Dockerfile (its runtime stage, with this
// tree's binaries: scripts/build_image.sh --from-tree, reused while they are unchanged), two
// containers on one container network, each running one `mgpu run` node, a host folder shared
// by both as /runs. CPU Gloo DDP on the image's Fashion-MNIST:
//   - the two containers train to the param_checksum of the same job on one host (2 ranks), with
//     the layout given by flags, and once more by Kubeflow's PET_* variables instead;
//   - one container killed mid-run: the other exits within the heartbeat timeout (plus the stop
//     grace), naming the lost node;
//   - a run cut short that way, resumed with --resume from the shared folder, ends with the
//     param_checksum of the uninterrupted run;
//   - a node without the token, and a job whose second node never comes, are told what is wrong.
// The engine is docker or podman (scripts/container_engine.sh). Where none can start containers
// the cluster tests are skipped, printing why; the scripts' own refusals (no engine, an engine
// that cannot start containers) are checked everywhere with stand-in engines.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;
using Clock = std::chrono::steady_clock;

const std::string kRoot = MGPU_SOURCE_DIR;
constexpr const char* kImage = "mgpu:ctest";
constexpr const char* kToken = "container-test-secret";
constexpr double kHeartbeatTimeout = 10;
constexpr double kStopGrace = 3;  // the launcher's SIGTERM-to-SIGKILL grace for a worker

// The build folder the binaries under test are in (<build>/bin/mgpu).
std::string BuildDir() {
  const std::string launcher = MGPU_LAUNCHER_BIN;
  const std::string bin = launcher.substr(0, launcher.rfind('/'));
  return bin.substr(0, bin.rfind('/'));
}

std::string LastLine(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return "";
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// The engine that runs the tests' containers, found and given the image once per process.
struct Engine {
  std::string command;      // docker or podman
  std::string skip_reason;  // set when no engine here can start containers
  std::string failure;      // set when the image could not be built
};

const Engine& TheEngine() {
  static const Engine engine = [] {
    Engine found;
    const CommandResult probe = RunCommand({"bash", kRoot + "/scripts/container_engine.sh"});
    if (probe.exit_code == 2) {
      found.skip_reason = probe.output;
      return found;
    }
    if (probe.exit_code != 0) {
      found.failure = "scripts/container_engine.sh exited " + std::to_string(probe.exit_code) + ":\n" + probe.output;
      return found;
    }
    found.command = LastLine(probe.output);
    const CommandResult built =
        RunCommand({"bash", kRoot + "/scripts/build_image.sh", "--from-tree", BuildDir(), "--tag", kImage});
    std::fprintf(stderr, "%s", built.output.c_str());
    if (built.exit_code != 0) found.failure = "scripts/build_image.sh failed:\n" + built.output;
    return found;
  }();
  return engine;
}

// Podman reads the project's settings (runc, no default ulimits) from this file; docker ignores it.
const std::vector<std::string> kEngineEnvironment = {"CONTAINERS_CONF=" + kRoot + "/docker/containers.conf"};

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

class ContainerCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    const Engine& engine = TheEngine();
    if (!engine.skip_reason.empty()) {
      std::fprintf(stderr, "skipping the container cluster tests: %s\n", engine.skip_reason.c_str());
      GTEST_SKIP() << engine.skip_reason;
    }
    ASSERT_TRUE(engine.failure.empty()) << engine.failure;
    static std::atomic<int> counter{0};
    network_ = "mgpu-ctest-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    const CommandResult created = EngineCall({"network", "create", network_});
    ASSERT_EQ(created.exit_code, 0) << created.output;
    network_created_ = true;
    // The containers write as root into the shared folder.
    ::chmod(runs_.path().c_str(), 0777);
  }

  void TearDown() override {
    for (const std::string& name : containers_) EngineCall({"rm", "-f", name});
    if (network_created_) EngineCall({"network", "rm", "-f", network_});
  }

  // The engine with `args`, as the tests' containers are run.
  CommandResult EngineCall(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {TheEngine().command};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, kEngineEnvironment);
  }

  // A container name of this test's (removed at its end), which the network's DNS resolves.
  std::string Name(const std::string& role) {
    containers_.push_back(network_ + "-" + role);
    return containers_.back();
  }

  // `mgpu run LAUNCHER WORKER` in a fresh container `name` on the test's network, with /runs
  // shared, the environment `env` ("NAME=value") and a small CPU Gloo DDP job on Fashion-MNIST.
  std::vector<std::string> Container(const std::string& name, const std::vector<std::string>& env,
                                     const std::vector<std::string>& launcher, const std::vector<std::string>& worker) {
    std::vector<std::string> argv = {TheEngine().command, "run", "--rm", "--name", name, "--network", network_,
                                     "-v", runs_.path() + ":/runs"};
    for (const std::string& variable : env) argv.insert(argv.end(), {"-e", variable});
    argv.insert(argv.end(), {kImage, "mgpu", "run"});
    argv.insert(argv.end(), launcher.begin(), launcher.end());
    for (const char* flag : {"--mode", "ddp", "--backend", "gloo", "--device", "cpu", "--model", "lenet", "--dataset",
                             "fashion-mnist", "--threads", "1", "--batch-size", "32", "--log-every", "1", "--seed", "7"}) {
      argv.push_back(flag);
    }
    argv.insert(argv.end(), worker.begin(), worker.end());
    return argv;
  }

  // Node `node` of a 2-node job, 1 worker each, its layout and token given by flags; node 0 is
  // the container `node0`.
  std::vector<std::string> Node(int node, const std::string& node0, const std::string& name,
                                const std::vector<std::string>& worker, const std::vector<std::string>& env = {}) {
    return Container(name, env,
                     {"--nnodes", "2", "--node-rank", std::to_string(node), "--nproc-per-node", "1", "--master-addr",
                      node0, "--master-port", "29500", "--token", kToken, "--heartbeat-timeout",
                      std::to_string(static_cast<int>(kHeartbeatTimeout))},
                     worker);
  }

  // Both nodes of a job writing into /runs/FOLDER, node 1 started first; returns node 0's
  // result, with node 1's appended to its output.
  CommandResult TwoNodes(const std::string& folder, const std::vector<std::string>& worker) {
    std::vector<std::string> flags = worker;
    flags.insert(flags.end(), {"--out", "/runs/" + folder});
    const std::string node0 = Name(folder + "-node0");
    BackgroundCommand node1(Node(1, node0, Name(folder + "-node1"), flags), kEngineEnvironment);
    CommandResult result = RunCommand(Node(0, node0, node0, flags), kEngineEnvironment);
    const CommandResult other = node1.Wait();
    if (other.exit_code != 0) result.exit_code = result.exit_code == 0 ? other.exit_code : result.exit_code;
    result.output += "\n--- node 1 (exit " + std::to_string(other.exit_code) + "):\n" + other.output;
    return result;
  }

  // The same job's param_checksum with both ranks in one container.
  nlohmann::json OneHostChecksum(const std::vector<std::string>& worker) {
    std::vector<std::string> flags = worker;
    flags.insert(flags.end(), {"--out", "/runs/one-host"});
    const CommandResult one_host = RunCommand(Container(Name("one-host"), {}, {"--nproc-per-node", "2"}, flags),
                                              kEngineEnvironment);
    EXPECT_EQ(one_host.exit_code, 0) << one_host.output;
    if (one_host.exit_code != 0) return nullptr;
    const nlohmann::json summary = ReadSummary(runs_ / "one-host");
    EXPECT_EQ(summary["world_size"], 2);
    return summary["param_checksum"];
  }

  std::string network_;
  bool network_created_ = false;
  std::vector<std::string> containers_;
  TempDir runs_;
};

TEST_F(ContainerCluster, TwoContainersTrainToTheSameParametersAsOneHost) {
  const std::vector<std::string> worker = {"--max-steps", "8"};
  const CommandResult across = TwoNodes("two-nodes", worker);
  ASSERT_EQ(across.exit_code, 0) << across.output;
  const nlohmann::json summary = ReadSummary(runs_ / "two-nodes");
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_EQ(summary["world_size"], 2);
  EXPECT_EQ(summary["launcher"]["nnodes"], 2);
  EXPECT_EQ(summary["steps"], 8);
  // Each rank bound its own container's address.
  const std::string rank0 = ReadText(runs_ / "two-nodes/logs/rank-0.log");
  const std::string rank1 = ReadText(runs_ / "two-nodes/logs/rank-1.log");
  const auto bound = [](const std::string& log) {
    const size_t at = log.find("gloo bound to ");
    return at == std::string::npos ? std::string() : log.substr(at, log.find(')', at) - at);
  };
  EXPECT_FALSE(bound(rank1).empty()) << rank1;
  EXPECT_NE(bound(rank0), bound(rank1)) << "the ranks should run in two containers";
  EXPECT_EQ(summary["param_checksum"], OneHostChecksum(worker)) << "two containers and one host must train alike";
}

TEST_F(ContainerCluster, KubeflowsPetVariablesGiveTheLayoutInsteadOfFlags) {
  const std::vector<std::string> worker = {"--max-steps", "8", "--out", "/runs/pet"};
  const std::string node0 = Name("pet-node0");
  const auto pet = [&](int node) {
    return std::vector<std::string>{"PET_NNODES=2", "PET_NPROC_PER_NODE=1", "PET_NODE_RANK=" + std::to_string(node),
                                    "PET_MASTER_ADDR=" + node0, "PET_MASTER_PORT=29500",
                                    std::string("MGPU_TOKEN=") + kToken};
  };
  BackgroundCommand node1(Container(Name("pet-node1"), pet(1), {}, worker), kEngineEnvironment);
  const CommandResult first = RunCommand(Container(node0, pet(0), {}, worker), kEngineEnvironment);
  const CommandResult second = node1.Wait();
  ASSERT_EQ(first.exit_code, 0) << first.output << "\n--- node 1:\n" << second.output;
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(first.output.find("layout from Kubeflow environment"), std::string::npos) << first.output;
  EXPECT_NE(second.output.find("layout from Kubeflow environment"), std::string::npos) << second.output;
  const nlohmann::json summary = ReadSummary(runs_ / "pet");
  EXPECT_EQ(summary["launcher"]["nnodes"], 2);
  EXPECT_EQ(summary["param_checksum"], OneHostChecksum({"--max-steps", "8"}));
}

TEST_F(ContainerCluster, KillingOneContainerStopsTheOtherWithinTheHeartbeatTimeoutNamingTheLostNode) {
  const std::string node0 = Name("kill-node0"), node1 = Name("kill-node1");
  const std::vector<std::string> flags = {"--epochs", "100000", "--out", "/runs/kill"};
  BackgroundCommand second(Node(1, node0, node1, flags), kEngineEnvironment);
  BackgroundCommand first(Node(0, node0, node0, flags), kEngineEnvironment);
  ASSERT_TRUE(WaitFor([&] { return LineCount(runs_ / "kill/metrics.csv") > 3; }, 120))
      << "the two-container job did not start training";
  // Heartbeats come once a second: let both nodes report training steps before the kill.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const CommandResult killed = EngineCall({"kill", node1});
  ASSERT_EQ(killed.exit_code, 0) << killed.output;
  const auto killed_at = Clock::now();
  const CommandResult result = first.Wait();
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  second.Wait();
  std::fprintf(stderr, "node 0 exited %d, %.1f s after node 1's container was killed\n", result.exit_code, seconds);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  // The heartbeat timeout, the stop grace, and polling and reporting on a busy machine.
  EXPECT_LT(seconds, kHeartbeatTimeout + kStopGrace + 10) << result.output;
  EXPECT_NE(result.output.find("node 1 (host"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(") lost"), std::string::npos) << result.output;
  const nlohmann::json summary = ReadSummary(runs_ / "kill");
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_EQ(summary["launcher"]["root_cause"]["kind"], "node-lost") << summary["launcher"].dump(2);
  EXPECT_EQ(summary["launcher"]["root_cause"]["rank"], 1) << summary["launcher"].dump(2);
}

TEST_F(ContainerCluster, ResumingFromTheSharedFolderEndsAsTheUninterruptedRun) {
  const std::vector<std::string> job = {"--max-steps", "16", "--checkpoint-every", "4"};
  const std::string node0 = Name("cut-node0"), node1 = Name("cut-node1");
  // Rank 1 stops after step 9 (step 8's checkpoint is written, rank 0 waits for rank 1 in step
  // 10), so the kill lands mid-run whatever this machine's speed.
  std::vector<std::string> cut = job;
  cut.insert(cut.end(), {"--out", "/runs/cut"});
  const std::vector<std::string> hang = {"MGPU_TEST_FAULTS=hang-at-step=9,hang-rank=1"};
  BackgroundCommand second(Node(1, node0, node1, cut, hang), kEngineEnvironment);
  BackgroundCommand first(Node(0, node0, node0, cut, hang), kEngineEnvironment);
  ASSERT_TRUE(WaitFor([&] { return PathExists(runs_ / "cut/checkpoints/step-8.ckpt"); }, 120))
      << "no checkpoint of step 8";
  const CommandResult killed = EngineCall({"kill", node1});
  ASSERT_EQ(killed.exit_code, 0) << killed.output;
  const CommandResult interrupted = first.Wait();
  second.Wait();
  ASSERT_NE(interrupted.exit_code, 0) << interrupted.output;
  EngineCall({"rm", "-f", node0});  // --rm removes it; a stopped one would keep the name taken
  EngineCall({"rm", "-f", node1});

  std::vector<std::string> resume = job;
  resume.insert(resume.end(), {"--resume", "/runs/cut"});
  const CommandResult resumed = TwoNodes("cut", resume);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const nlohmann::json summary = ReadSummary(runs_ / "cut");
  EXPECT_EQ(summary["status"], "ok");
  EXPECT_EQ(summary["steps"], 16);
  EXPECT_EQ(summary["param_checksum"], OneHostChecksum(job)) << "resumed and uninterrupted runs must end alike";
}

TEST_F(ContainerCluster, ANodeWithoutTheTokenIsToldToGiveOne) {
  const CommandResult result =
      RunCommand(Container(Name("no-token"), {},
                           {"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "1", "--master-addr", "node0"},
                           {"--max-steps", "1", "--out", "/runs/no-token"}),
                 kEngineEnvironment);
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("--master-addr node0 is not a loopback address"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("--token (or MGPU_TOKEN)"), std::string::npos) << result.output;
}

TEST_F(ContainerCluster, ANodeThatNeverJoinsIsNamedWithTheAddressToReach) {
  const std::string node0 = Name("alone-node0");
  const CommandResult result =
      RunCommand(Container(node0, {std::string("MGPU_TOKEN=") + kToken},
                           {"--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1", "--master-addr", node0,
                            "--master-port", "29500", "--heartbeat-timeout", "5"},
                           {"--max-steps", "1", "--out", "/runs/alone"}),
                 kEngineEnvironment);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("node(s) 1 never joined: no `mgpu run --node-rank 1` reached the coordinator at " +
                               node0 + ":29501"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(ReadSummary(runs_ / "alone")["launcher"]["root_cause"]["kind"], "node-absent");
}

// The scripts' refusals, with stand-in engines on PATH (run everywhere, engine or not).
class ContainerEngineScript : public ::testing::Test {
 protected:
  // An executable `name` in the stand-in folder that runs `body` (bash).
  void StandIn(const std::string& name, const std::string& body) {
    WriteBytes(bin_ / name, "#!/usr/bin/env bash\n" + body + "\n");
    ::chmod((bin_ / name).c_str(), 0755);
  }
  CommandResult Probe(const std::string& engine) {
    return RunCommand({"bash", kRoot + "/scripts/container_engine.sh"},
                      {"PATH=" + bin_.path() + ":/usr/bin:/bin", "MGPU_CONTAINER_ENGINE=" + engine});
  }
  TempDir bin_;
};

TEST_F(ContainerEngineScript, ADockerClientWithoutADaemonIsNoEngine) {
  StandIn("docker",
          "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\n"
          "exit 1");
  const CommandResult result = Probe("docker");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("no container engine can run here: docker is installed, but `docker info` fails"),
            std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("Cannot connect to the Docker daemon"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("fix: start Docker's daemon"), std::string::npos) << result.output;
}

TEST_F(ContainerEngineScript, AnEngineThatCannotStartContainersIsNamedWithItsError) {
  StandIn("podman",
          "case \"$1\" in\n"
          "  run) echo 'Error: crun: cgroups in hybrid mode not supported: OCI runtime error' >&2; exit 126 ;;\n"
          "  *) exit 0 ;;\n"
          "esac");
  const CommandResult result = Probe("podman");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("podman cannot start a container"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("cgroups in hybrid mode not supported"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("fix: install runc"), std::string::npos) << result.output;
}

TEST_F(ContainerEngineScript, AnUnknownEngineNameIsRefused) {
  const CommandResult result = Probe("lxc");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("MGPU_CONTAINER_ENGINE='lxc' is not an engine mgpu knows"), std::string::npos)
      << result.output;
}

}  // namespace
}  // namespace mgpu
