// Stopping a run with a signal, end to end on the CPU: SIGTERM, SIGINT or SIGUSR1 stop a bare
// worker, two DDP ranks (each signalled, as Slurm does, or one alone) and `mgpu run` (SIGTERM or
// a hang-up) at a step boundary common to every rank; the checkpoint of that step is written,
// summary.json says "interrupted", the exit code is 128 + N, and --resume from it ends with the
// parameters of a run that was never stopped. A worker under nohup trains on through a hang-up.
// A second SIGTERM ends a worker, or `mgpu run` and its workers, that cannot reach a step
// boundary.
//
// The runs are endless (--epochs 100000) until signalled once metrics.csv shows a few steps, so
// the signal always lands mid-run whatever the machine's speed; the step it stopped at is read
// back, and the uninterrupted reference trains to a few steps past it.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "tests/support/test_support.h"

#include "tests/support/worker_logs.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

constexpr double kStartDeadlineSeconds = 120;  // generous: a loaded 2-core machine
constexpr int64_t kStepsAfterStop = 7;         // the resumed run's steps

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

// The step a rank's log says it stopped at for `signal` ("SIGTERM ... at step N:"), or -1.
int64_t LoggedStopStep(const std::string& log, const std::string& signal) {
  std::smatch match;
  const std::string text = ReadText(log);
  if (!std::regex_search(text, match, std::regex(signal + R"((?: \(received by rank \d+\))? at step (\d+):)"))) return -1;
  return std::stoll(match[1]);
}

// Whether `pid` runs (not exited, not a zombie waiting to be reaped).
bool ProcessRunning(pid_t pid) {
  const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
  const size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] != 'Z';
}

class StopSignalCli : public ::testing::Test {
 protected:
  // 640 training images in batches of 32: 20 steps per epoch, so stops land mid-epoch too.
  static void SetUpTestSuite() {
    data_ = new TempDir();
    WriteTinyMnistLike(data_->path(), 640, 200);
  }
  static void TearDownTestSuite() { delete data_; }

  // Worker flags of an endless LeNet run into out_/name (a metrics row per step).
  std::vector<std::string> Flags(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags = {"--data-dir", data_->path(), "--device", "cpu", "--threads", "1",
                                      "--batch-size", "32", "--epochs", "100000", "--seed", "5", "--log-every", "1",
                                      "--optimizer", "sgd", "--momentum", "0.9", "--out", out_ / name};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }
  std::vector<std::string> Worker(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN};
    for (const std::string& flag : Flags(name, extra)) argv.push_back(flag);
    return argv;
  }

  // Waits until every rank of out_/name has logged its pid and the run has taken a few steps.
  std::vector<pid_t> WaitUntilTraining(const std::string& name, int ranks) {
    std::vector<pid_t> pids(ranks, -1);
    const bool training = WaitFor(
        [&] {
          for (int rank = 0; rank < ranks; ++rank) {
            pids[rank] = LoggedPid(out_ / (name + "/logs/rank-" + std::to_string(rank) + ".log"));
            if (pids[rank] <= 0) return false;
          }
          return LineCount(out_ / (name + "/metrics.csv")) > 4;
        },
        kStartDeadlineSeconds);
    EXPECT_TRUE(training) << name << " did not start training";
    return training ? pids : std::vector<pid_t>{};
  }

  // Two ranks with torchrun's environment.
  std::vector<std::unique_ptr<BackgroundCommand>> StartTwoRanks(const std::string& name,
                                                                const std::vector<std::string>& extra = {}) {
    const int port = FreeLocalPort();
    std::vector<std::unique_ptr<BackgroundCommand>> ranks;
    std::vector<std::string> argv = Worker(name, extra);
    argv.insert(argv.begin() + 1, {"--mode", "ddp"});
    for (int rank = 0; rank < 2; ++rank) {
      ranks.push_back(std::make_unique<BackgroundCommand>(argv, TorchrunEnvironment(rank, 2, port)));
    }
    return ranks;
  }

  // summary.json of a run stopped by `signal`: status, record, and the checkpoint it names.
  // Returns the step it stopped at.
  int64_t ExpectInterrupted(const std::string& name, const std::string& signal) {
    const nlohmann::json summary = ReadSummary(out_ / name);
    EXPECT_EQ(summary["status"], "interrupted");
    const nlohmann::json& record = summary["interrupted"];
    EXPECT_EQ(record["signal"], signal);
    const int64_t step = summary["steps"].get<int64_t>();
    EXPECT_EQ(record["step"], step);
    EXPECT_GT(step, 0);
    const std::string checkpoint = out_ / (name + "/checkpoints/step-" + std::to_string(step) + ".ckpt");
    EXPECT_EQ(record["checkpoint"], checkpoint);
    EXPECT_TRUE(IsRegularFile(checkpoint));
    EXPECT_TRUE(IsRegularFile(out_ / (name + "/checkpoints/latest.ckpt")));
    EXPECT_TRUE(IsRegularFile(out_ / (name + "/model_state_dict.pt"))) << "the weights are written as at a normal end";
    EXPECT_TRUE(summary["param_checksum"].is_number());
    return step;
  }

  // Resumes out_/stopped into out_/resumed and trains out_/whole uninterrupted, both to `steps`:
  // the same parameters, bit for bit.
  void ExpectResumeMatchesUninterrupted(const std::string& stopped, int64_t steps, int ranks) {
    const std::vector<std::string> until = {"--max-steps", std::to_string(steps)};
    std::vector<std::string> resume = until;
    resume.insert(resume.end(), {"--resume", out_ / stopped});
    for (const auto& [name, extra] : {std::pair{std::string("whole"), until}, std::pair{std::string("resumed"), resume}}) {
      if (ranks == 1) {
        const CommandResult result = RunCommand(Worker(name, extra));
        ASSERT_EQ(result.exit_code, 0) << result.output;
      } else {
        for (auto& rank : StartTwoRanks(name, extra)) {
          const CommandResult result = rank->Wait();
          ASSERT_EQ(result.exit_code, 0) << result.output;
        }
      }
    }
    const nlohmann::json whole = ReadSummary(out_ / "whole"), resumed = ReadSummary(out_ / "resumed");
    EXPECT_EQ(resumed["status"], "ok");
    EXPECT_EQ(resumed["steps"], steps);
    EXPECT_EQ(resumed["param_checksum"].get<double>(), whole["param_checksum"].get<double>());
    EXPECT_EQ(resumed["test_loss"].get<double>(), whole["test_loss"].get<double>());
  }

  // Signals `mgpu run` (2 DDP ranks) once both train: it forwards the signal, every worker stops
  // at one step with exit code 128 + signal, and the job says "interrupted".
  void ExpectMgpuRunForwards(int signal, const std::string& name) {
    std::vector<std::string> argv = {MGPU_LAUNCHER_BIN, "run", "--nproc-per-node", "2", "--mode", "ddp"};
    for (const std::string& flag : Flags("stopped")) argv.push_back(flag);
    BackgroundCommand job(argv);
    const std::vector<pid_t> pids = WaitUntilTraining("stopped", 2);
    ASSERT_EQ(pids.size(), 2u);
    const std::string stat = ReadText("/proc/" + std::to_string(pids[0]) + "/stat");  // field 4: the launcher
    pid_t launcher = -1;
    char state = 0;
    ASSERT_EQ(std::sscanf(stat.c_str() + stat.rfind(')') + 1, " %c %d", &state, &launcher), 2);
    ::kill(launcher, signal);
    const CommandResult result = job.Wait();
    EXPECT_EQ(result.exit_code, 128 + signal) << result.output;
    const int64_t step = ExpectInterrupted("stopped", name);
    const nlohmann::json launcher_record = ReadSummary(out_ / "stopped")["launcher"];
    EXPECT_EQ(launcher_record["root_cause"]["kind"], "interrupted");
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_EQ(launcher_record["ranks"][rank]["exit_code"], 128 + signal) << "rank " << rank << " stopped itself";
      EXPECT_EQ(LoggedStopStep(out_ / ("stopped/logs/rank-" + std::to_string(rank) + ".log"), name), step);
    }
  }

  static TempDir* data_;
  TempDir out_;
};

TempDir* StopSignalCli::data_ = nullptr;

TEST_F(StopSignalCli, SigtermStopsABareWorkerWithACheckpointThatResumesExactly) {
  BackgroundCommand run(Worker("stopped"));
  const std::vector<pid_t> pids = WaitUntilTraining("stopped", 1);
  ASSERT_EQ(pids.size(), 1u);
  ::kill(pids[0], SIGTERM);
  const CommandResult result = run.Wait();
  ASSERT_EQ(result.exit_code, 128 + SIGTERM) << result.output;
  const int64_t step = ExpectInterrupted("stopped", "SIGTERM");
  const std::string line = "SIGTERM at step " + std::to_string(step) + ": checkpoint written to " +
                           out_ / ("stopped/checkpoints/step-" + std::to_string(step) + ".ckpt") +
                           ", resume with --resume " + out_ / "stopped";
  EXPECT_NE(result.output.find(line), std::string::npos) << result.output;
  ExpectResumeMatchesUninterrupted("stopped", step + kStepsAfterStop, 1);
}

TEST_F(StopSignalCli, SigintStopsABareWorkerWithExitCode130) {
  BackgroundCommand run(Worker("stopped"));
  const std::vector<pid_t> pids = WaitUntilTraining("stopped", 1);
  ASSERT_EQ(pids.size(), 1u);
  ::kill(pids[0], SIGINT);
  const CommandResult result = run.Wait();
  EXPECT_EQ(result.exit_code, 128 + SIGINT) << result.output;
  ExpectInterrupted("stopped", "SIGINT");
}

TEST_F(StopSignalCli, SigusrOneOnEveryDdpRankStopsBothAtOneStepAndResumesExactly) {
  std::vector<std::unique_ptr<BackgroundCommand>> ranks = StartTwoRanks("stopped");
  const std::vector<pid_t> pids = WaitUntilTraining("stopped", 2);
  ASSERT_EQ(pids.size(), 2u);
  for (pid_t pid : pids) ::kill(pid, SIGUSR1);  // as Slurm does: every task
  for (auto& rank : ranks) {
    const CommandResult result = rank->Wait();
    EXPECT_EQ(result.exit_code, 128 + SIGUSR1) << result.output;
  }
  const int64_t step = ExpectInterrupted("stopped", "SIGUSR1");
  for (const char* log : {"stopped/logs/rank-0.log", "stopped/logs/rank-1.log"}) {
    EXPECT_EQ(LoggedStopStep(out_ / log, "SIGUSR1"), step) << log;
  }
  ExpectResumeMatchesUninterrupted("stopped", step + kStepsAfterStop, 2);
}

TEST_F(StopSignalCli, SigtermToOneDdpRankStopsEveryRankAtOneStep) {
  std::vector<std::unique_ptr<BackgroundCommand>> ranks = StartTwoRanks("stopped");
  const std::vector<pid_t> pids = WaitUntilTraining("stopped", 2);
  ASSERT_EQ(pids.size(), 2u);
  ::kill(pids[1], SIGTERM);
  for (auto& rank : ranks) {
    const CommandResult result = rank->Wait();
    EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.output;
  }
  const int64_t step = ExpectInterrupted("stopped", "SIGTERM");
  EXPECT_EQ(ReadSummary(out_ / "stopped")["interrupted"]["rank"], 1);
  for (const char* log : {"stopped/logs/rank-0.log", "stopped/logs/rank-1.log"}) {
    EXPECT_EQ(LoggedStopStep(out_ / log, "SIGTERM"), step) << log;
  }
}

TEST_F(StopSignalCli, SigtermToMgpuRunReachesEveryWorkerAndTheJobSaysInterrupted) {
  ExpectMgpuRunForwards(SIGTERM, "SIGTERM");
}

// A closed terminal (or the kernel's hang-up of a stopped job whose shell was killed) must not kill
// the launcher, and its workers with it by their parent-death signal, with no checkpoint.
TEST_F(StopSignalCli, SighupToMgpuRunStopsTheJobAsSigtermDoes) { ExpectMgpuRunForwards(SIGHUP, "SIGHUP"); }

// Ctrl-Z, then the shell is killed (an exiting bash would send its stopped jobs SIGTERM): the
// kernel sends the stopped job's process group, orphaned now, SIGHUP and SIGCONT (POSIX).
// `mgpu run` must stop the run as for a hang-up, not die with its workers. The shell runs in a
// session of its own (setsid), so the orphaning does not depend on the session this test runs
// in; the launcher's output goes to a file, as it outlives the shell.
TEST_F(StopSignalCli, ASuspendedMgpuRunWhoseShellIsKilledStopsWithACheckpoint) {
  const std::string script =
      "set -m; metrics=$1; log=$2; shift 2; \"$@\" > \"$log\" 2>&1 & launcher=$!; echo \"launcher $launcher\"; "
      "for i in $(seq 1200); do [ \"$(cat \"$metrics\" 2>/dev/null | wc -l)\" -gt 4 ] && break; sleep 0.1; done; "
      // The kernel hangs up only a group whose stop has completed: every thread of the launcher
      // stopped, the last one marking the group a moment later.
      "kill -STOP $launcher; for i in $(seq 100); do stopped=1; for task in /proc/$launcher/task/*/stat; do "
      "read -r stat < $task 2>/dev/null; case \"${stat##*) }\" in T*) ;; *) stopped=0;; esac; done; "
      "[ $stopped = 1 ] && break; sleep 0.1; done; sleep 0.2; kill -KILL $$";
  std::vector<std::string> argv = {"setsid", "bash", "-c", script, "bash", out_ / "stopped/metrics.csv",
                                   out_ / "launcher.log", MGPU_LAUNCHER_BIN, "run", "--nproc-per-node", "2",
                                   "--mode", "ddp"};
  for (const std::string& flag : Flags("stopped")) argv.push_back(flag);
  const CommandResult shell = RunCommand(argv);
  ASSERT_EQ(shell.exit_code, 128 + SIGKILL) << shell.output;
  const pid_t launcher = static_cast<pid_t>(std::atoi(shell.output.substr(shell.output.find("launcher ") + 9).c_str()));
  ASSERT_GT(launcher, 1) << shell.output;
  const bool stopped = WaitFor([&] { return IsRegularFile(out_ / "stopped/summary.json") && !ProcessRunning(launcher); },
                               kStartDeadlineSeconds);
  if (!stopped) ::kill(launcher, SIGKILL);
  ASSERT_TRUE(stopped) << "mgpu run did not end, or ended without summary.json, after the hang-up; its output:\n"
                       << ReadText(out_ / "launcher.log");
  ExpectInterrupted("stopped", "SIGHUP");
  const nlohmann::json launcher_record = ReadSummary(out_ / "stopped")["launcher"];
  EXPECT_EQ(launcher_record["root_cause"]["kind"], "interrupted") << ReadText(out_ / "launcher.log");
  EXPECT_EQ(launcher_record["exit_code"], 128 + SIGHUP);
}

TEST_F(StopSignalCli, AWorkerUnderNohupTrainsOnThroughAHangUp) {
  std::vector<std::string> argv = Worker("kept");
  argv.insert(argv.begin(), "nohup");
  BackgroundCommand run(argv);
  const std::vector<pid_t> pids = WaitUntilTraining("kept", 1);
  ASSERT_EQ(pids.size(), 1u);
  ::kill(pids[0], SIGHUP);
  const int64_t rows_at_hang_up = LineCount(out_ / "kept/metrics.csv");
  EXPECT_TRUE(WaitFor([&] { return LineCount(out_ / "kept/metrics.csv") > rows_at_hang_up + 5; }, kStartDeadlineSeconds))
      << "the worker stopped training after a SIGHUP that nohup ignores";
  ::kill(pids[0], SIGTERM);
  const CommandResult result = run.Wait();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.output;
  ExpectInterrupted("kept", "SIGTERM");
}

TEST_F(StopSignalCli, ASecondSigtermEndsAWorkerThatCannotReachAStepBoundary) {
  BackgroundCommand run(Worker("stuck"), {"MGPU_TEST_FAULTS=hang-at-step=3"});
  pid_t pid = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        pid = LoggedPid(out_ / "stuck/logs/rank-0.log");
        return pid > 0 && ReadText(out_ / "stuck/logs/rank-0.log").find("hangs on purpose") != std::string::npos;
      },
      kStartDeadlineSeconds));
  ::kill(pid, SIGTERM);
  // A second signal within the first second counts as the same request (stop_signal.h): wait it out.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(ProcessRunning(pid)) << "the first SIGTERM only asks for a stop at the next step boundary";
  ::kill(pid, SIGTERM);
  const CommandResult result = run.Wait();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.output;
  EXPECT_FALSE(PathExists(out_ / "stuck/summary.json")) << "the second signal exits at once";
}

TEST_F(StopSignalCli, ASecondSigtermEndsMgpuRunAndItsStuckWorkersAtOnce) {
  std::vector<std::string> argv = {MGPU_LAUNCHER_BIN, "run", "--nproc-per-node", "2", "--mode", "ddp"};
  for (const std::string& flag : Flags("stuck")) argv.push_back(flag);
  BackgroundCommand job(argv, {"MGPU_TEST_FAULTS=hang-at-step=3"});
  std::vector<pid_t> workers(2, -1);
  ASSERT_TRUE(WaitFor(
      [&] {
        for (int rank = 0; rank < 2; ++rank) {
          const std::string log = out_ / ("stuck/logs/rank-" + std::to_string(rank) + ".log");
          workers[rank] = LoggedPid(log);
          if (workers[rank] <= 0 || ReadText(log).find("hangs on purpose") == std::string::npos) return false;
        }
        return true;
      },
      kStartDeadlineSeconds));
  const std::string stat = ReadText("/proc/" + std::to_string(workers[0]) + "/stat");  // field 4: the launcher
  pid_t launcher = -1;
  char state = 0;
  ASSERT_EQ(std::sscanf(stat.c_str() + stat.rfind(')') + 1, " %c %d", &state, &launcher), 2);
  ::kill(launcher, SIGTERM);  // forwarded; the hung workers never reach a step boundary
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past the same-request window
  EXPECT_TRUE(ProcessRunning(launcher)) << "the first SIGTERM waits for the workers";
  ::kill(launcher, SIGTERM);
  const CommandResult result = job.Wait();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.output;
  for (pid_t worker : workers) {
    EXPECT_TRUE(WaitFor([&] { return !ProcessRunning(worker); }, 30)) << "worker " << worker << " outlived mgpu run";
  }
}

}  // namespace
}  // namespace mgpu
