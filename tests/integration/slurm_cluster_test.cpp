// mgpu under a real Slurm: each test starts a one-node Slurm on this machine (munged as the
// munge user with a fresh key, slurmctld and slurmd as root, a generated slurm.conf in a temp
// folder found through SLURM_CONF, private ports, state and spool folders: nothing in /etc is
// read or changed beyond what Debian's packages installed), waits for the node to be idle, and
// stops everything it started when the test ends, also when it fails.
//
//   - `srun -n2 mgpu-worker --mode ddp` (Gloo) reaches the param_checksum of the same two ranks
//     under torchrun's environment, and so does `srun mgpu run` with one launcher task;
//   - a task killed under `srun --kill-on-bad-exit=1` ends the job within the collective
//     timeout, srun naming the task, with no rank left running;
//   - ddp/slurm_nodelist.h expands node lists as `scontrol show hostnames` does;
//   - deploy/slurm/ddp-ranks.sbatch, interrupted by SIGUSR1 before its time limit, requeues
//     itself and resumes to the param_checksum of an uninterrupted run.
//
// Needs root, Debian's slurm-wlm and munge (scripts/setup.sh installs them); skipped, saying
// why, otherwise.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "ddp/slurm_nodelist.h"
#include "tests/support/test_support.h"

#include "tests/support/worker_logs.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;
using Clock = std::chrono::steady_clock;

constexpr double kStartSeconds = 60;  // for each daemon to come up on a loaded machine

std::string FindProgram(const std::string& name) {
  for (const char* folder : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::string path = std::string(folder) + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string ShortHostName() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string name = host;
  return name.substr(0, name.find('.'));
}

std::string Tail(const std::string& path, size_t bytes = 2000) {
  const std::string text = PathExists(path) ? ReadText(path) : "(no " + path + ")";
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

// A daemon run in the foreground as a child of the test, output into `log`, as `user` ("" for
// root). It dies with the test process (PR_SET_PDEATHSIG), so a test killed by ctest's timeout
// leaves no daemon behind either.
class Daemon {
 public:
  Daemon(std::vector<std::string> argv, const std::string& log, const std::string& user) {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    if (!user.empty()) {
      const passwd* entry = ::getpwnam(user.c_str());
      if (entry == nullptr) throw std::runtime_error("no user " + user);
      uid = entry->pw_uid;
      gid = entry->pw_gid;
      int count = 0;
      ::getgrouplist(user.c_str(), gid, nullptr, &count);  // sets count to the number needed
      groups.resize(static_cast<size_t>(count));
      if (::getgrouplist(user.c_str(), gid, groups.data(), &count) < 0) throw std::runtime_error("getgrouplist failed");
      groups.resize(static_cast<size_t>(count));
    }
    std::vector<char*> args;
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out < 0) throw std::runtime_error("cannot write " + log);
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls from here to exec.
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
      const int null = ::open("/dev/null", O_RDONLY);
      ::dup2(null, STDIN_FILENO);
      if (uid != 0 && (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
        ::_exit(126);
      }
      // After the change of user, which clears the death signal.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(125);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out);
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }

  ~Daemon() { Stop(); }

  bool Running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }

  // SIGTERM, then SIGKILL if it is still there after 10 s.
  void Stop() {
    if (!Running()) return;
    ::kill(pid_, SIGTERM);
    if (!WaitFor([&] { return !Running(); }, 10)) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
};

// munged, slurmctld and slurmd for one node named after this host.
class OneNodeSlurm {
 public:
  // nullptr, with `why` set, where Slurm cannot run here (not root, packages missing).
  static std::unique_ptr<OneNodeSlurm> Create(std::string& why) {
    if (::geteuid() != 0) {
      why = "a private Slurm runs its daemons as root: run the test as root";
      return nullptr;
    }
    for (const char* program : {"munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol", "sinfo", "squeue",
                                "scancel"}) {
      if (FindProgram(program).empty()) {
        why = std::string("no `") + program + "`: install Debian's slurm-wlm and munge (scripts/setup.sh does)";
        return nullptr;
      }
    }
    if (::getpwnam("munge") == nullptr) {
      why = "no `munge` user (Debian's munge package creates it)";
      return nullptr;
    }
    return std::unique_ptr<OneNodeSlurm>(new OneNodeSlurm());
  }

  ~OneNodeSlurm() {
    // Jobs first, so that no step outlives slurmd; then the daemons, controller last but one.
    if (slurmd_ && slurmd_->Running()) {
      RunCommand(Slurm({FindProgram("scancel"), "--full", "--user=root"}));
      WaitFor([&] { return RunCommand(Slurm({FindProgram("squeue"), "-h"})).output.empty(); }, 20);
    }
    slurmd_.reset();
    slurmctld_.reset();
    munged_.reset();
  }

  // Starts the daemons; "" once the node is idle, else what went wrong.
  std::string Start() {
    const std::string folder = dir_.path();
    ::chmod(folder.c_str(), 0755);  // munged (the munge user) must reach its folders inside
    const passwd* munge = ::getpwnam("munge");
    for (const std::string sub : {"munge-key", "munge-run"}) {
      MakeDirectories(folder + "/" + sub);
      if (::chown((folder + "/" + sub).c_str(), munge->pw_uid, munge->pw_gid) != 0) return "cannot chown " + sub;
    }
    ::chmod((folder + "/munge-key").c_str(), 0700);
    ::chmod((folder + "/munge-run").c_str(), 0755);
    std::string key(1024, '\0');
    std::ifstream("/dev/urandom", std::ios::binary).read(key.data(), static_cast<std::streamsize>(key.size()));
    WriteBytes(folder + "/munge-key/munge.key", key);
    ::chown((folder + "/munge-key/munge.key").c_str(), munge->pw_uid, munge->pw_gid);
    ::chmod((folder + "/munge-key/munge.key").c_str(), 0600);
    socket_ = folder + "/munge-run/munge.socket";
    munged_ = std::make_unique<Daemon>(
        std::vector<std::string>{FindProgram("munged"), "--foreground", "--force", "--socket=" + socket_,
                                 "--key-file=" + folder + "/munge-key/munge.key",
                                 "--pid-file=" + folder + "/munge-run/munged.pid",
                                 "--log-file=" + folder + "/munge-key/munged.log",
                                 "--seed-file=" + folder + "/munge-key/munged.seed"},
        folder + "/munged.out", "munge");
    if (!WaitFor([&] { return PathExists(socket_); }, kStartSeconds)) {
      return "munged did not create its socket: " + Tail(folder + "/munged.out") + Tail(folder + "/munge-key/munged.log");
    }

    WriteConfig();
    slurmctld_ = std::make_unique<Daemon>(std::vector<std::string>{FindProgram("slurmctld"), "-D", "-i", "-f", conf_},
                                          folder + "/slurmctld.out", "");
    slurmd_ = std::make_unique<Daemon>(std::vector<std::string>{FindProgram("slurmd"), "-D", "-f", conf_},
                                       folder + "/slurmd.out", "");
    std::string state;
    const bool idle = WaitFor(
        [&] {
          state = RunCommand(Slurm({FindProgram("sinfo"), "-h", "-N", "-o", "%T"})).output;
          return state.rfind("idle", 0) == 0;
        },
        kStartSeconds);
    if (!idle) {
      return "the node did not become idle within " + std::to_string(static_cast<int>(kStartSeconds)) +
             " s (sinfo: " + state + ")\nslurmctld: " + Tail(folder + "/slurmctld.log") +
             "\nslurmd: " + Tail(folder + "/slurmd.log") + Tail(folder + "/slurmd.out");
    }
    return "";
  }

  // `argv` with this cluster's SLURM_CONF (through env(1), so that it replaces any inherited one).
  std::vector<std::string> Slurm(const std::vector<std::string>& argv) const {
    std::vector<std::string> wrapped = {"/usr/bin/env", "SLURM_CONF=" + conf_};
    wrapped.insert(wrapped.end(), argv.begin(), argv.end());
    return wrapped;
  }

  const std::string& host() const { return host_; }

 private:
  OneNodeSlurm() : host_(ShortHostName()) {}

  // The CPU count slurmd will register (`slurmd -C`): a node declaring more is drained.
  static std::string CpusSlurmdSees() {
    std::smatch match;
    const std::string hardware = RunCommand({FindProgram("slurmd"), "-C"}).output;
    if (std::regex_search(hardware, match, std::regex(R"(CPUs=(\d+))"))) return match[1];
    return std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  }

  void WriteConfig() {
    const std::string folder = dir_.path();
    for (const char* sub : {"state", "spool"}) MakeDirectories(folder + "/" + sub);
    conf_ = folder + "/slurm.conf";
    std::ostringstream conf;
    conf << "ClusterName=mgputest\n"
         << "SlurmctldHost=" << host_ << "(127.0.0.1)\n"
         << "SlurmctldPort=" << FreeLocalPort() << "\nSlurmdPort=" << FreeLocalPort() << "\n"
         << "SlurmUser=root\nSlurmdUser=root\n"
         // A requeued job waits cred_expire + 1 s before it may start again (120 s by default).
         << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << socket_ << ",cred_expire=10\n"
         << "StateSaveLocation=" << folder << "/state\nSlurmdSpoolDir=" << folder << "/spool\n"
         << "SlurmctldPidFile=" << folder << "/slurmctld.pid\nSlurmdPidFile=" << folder << "/slurmd.pid\n"
         << "SlurmctldLogFile=" << folder << "/slurmctld.log\nSlurmdLogFile=" << folder << "/slurmd.log\n"
         // No cgroups: processes tracked through /proc, tasks not confined.
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
         << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nMpiDefault=none\nReturnToService=2\n"
         << "SchedulerParameters=sched_interval=2\n"  // pending batch jobs start within 2 s, not 60
         // Tasks that outlive SIGTERM get SIGKILL 5 s later (the default 30 s would slow the failure test).
         << "KillWait=5\n"
         << "NodeName=" << host_ << " NodeAddr=127.0.0.1 CPUs=" << CpusSlurmdSees() << " State=UNKNOWN\n"
         << "PartitionName=test Nodes=" << host_ << " Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n";
    WriteBytes(conf_, conf.str());
    // Read next to slurm.conf; Debian's Slurm has no "disabled" plugin, v1 works without cgroups in use.
    WriteBytes(folder + "/cgroup.conf", "CgroupPlugin=cgroup/v1\n");
  }

  TempDir dir_;
  std::string host_;
  std::string conf_;
  std::string socket_;
  std::unique_ptr<Daemon> munged_, slurmctld_, slurmd_;
};

nlohmann::json ReadSummary(const std::string& folder) { return nlohmann::json::parse(ReadText(folder + "/summary.json")); }

bool ProcessGone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

class SlurmCluster : public ::testing::Test {
 protected:
  static constexpr int kSteps = 12;

  void SetUp() override {
    std::string why;
    slurm_ = OneNodeSlurm::Create(why);
    if (!slurm_) {
      std::fprintf(stderr, "skipping the Slurm tests: %s\n", why.c_str());
      GTEST_SKIP() << why;
    }
    const std::string failure = slurm_->Start();
    ASSERT_EQ(failure, "") << "Slurm is installed but would not start";
    WriteTinyMnistLike(data_.path(), 640, 200);
  }

  // The worker flags of a short CPU Gloo DDP job writing into out_/name.
  std::vector<std::string> WorkerFlags(const std::string& name) {
    return {"--mode", "ddp", "--backend", "gloo", "--device", "cpu", "--threads", "1", "--model", "lenet",
            "--data-dir", data_.path(), "--batch-size", "32", "--optimizer", "sgd", "--lr", "0.05", "--momentum",
            "0.9", "--seed", "11", "--log-every", "1", "--collective-timeout", "60", "--out", out_ / name};
  }

  // The reference: the same two ranks started with torchrun's environment.
  nlohmann::json TorchrunReference(const std::vector<std::string>& extra) {
    const int port = FreeLocalPort();
    std::vector<std::unique_ptr<BackgroundCommand>> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> argv = {MGPU_WORKER_BIN};
      for (const auto& flag : WorkerFlags("torchrun")) argv.push_back(flag);
      argv.insert(argv.end(), extra.begin(), extra.end());
      ranks.push_back(std::make_unique<BackgroundCommand>(argv, TorchrunEnvironment(rank, 2, port)));
    }
    for (auto& rank : ranks) {
      const CommandResult result = rank->Wait();
      EXPECT_EQ(result.exit_code, 0) << result.output;
    }
    return ReadSummary(out_ / "torchrun");
  }

  std::unique_ptr<OneNodeSlurm> slurm_;
  TempDir data_;
  TempDir out_;
};

TEST_F(SlurmCluster, SrunWithTwoTasksTrainsGlooDdpToTheChecksumOfTheTorchrunRun) {
  const std::vector<std::string> steps = {"--max-steps", std::to_string(kSteps)};
  // --overcommit: two tasks also fit a one-CPU machine.
  std::vector<std::string> srun = {FindProgram("srun"), "-N1", "-n2", "--overcommit", "--kill-on-bad-exit=1", "--chdir", out_.path(),
                                   MGPU_WORKER_BIN};
  for (const auto& flag : WorkerFlags("srun")) srun.push_back(flag);
  srun.insert(srun.end(), steps.begin(), steps.end());
  const CommandResult result = RunCommand(slurm_->Slurm(srun));
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const nlohmann::json under_srun = ReadSummary(out_ / "srun");
  EXPECT_EQ(under_srun["status"], "ok");
  EXPECT_EQ(under_srun["world_size"], 2);
  EXPECT_EQ(under_srun["steps"], kSteps);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadText(out_ / ("srun/logs/rank-" + std::to_string(rank) + ".log"));
    EXPECT_NE(log.find("rank source: Slurm environment (SLURM_PROCID"), std::string::npos) << log;
    EXPECT_NE(log.find("MASTER_ADDR " + slurm_->host() + " (first host of SLURM_STEP_NODELIST)"), std::string::npos)
        << log;
  }
  const nlohmann::json reference = TorchrunReference(steps);
  EXPECT_EQ(reference["world_size"], 2);
  EXPECT_EQ(under_srun["param_checksum"], reference["param_checksum"]) << "srun and torchrun must train alike";
  EXPECT_EQ(under_srun["rank_param_checksums"], reference["rank_param_checksums"]);
}

TEST_F(SlurmCluster, SrunWithOneMgpuRunTaskPerNodeTrainsToTheSameChecksum) {
  const std::vector<std::string> steps = {"--max-steps", std::to_string(kSteps)};
  std::vector<std::string> srun = {FindProgram("srun"), "-N1", "--ntasks-per-node=1", "--chdir", out_.path(),
                                   MGPU_LAUNCHER_BIN, "run", "--nproc-per-node", "2"};
  for (const auto& flag : WorkerFlags("mgpu-run")) srun.push_back(flag);
  srun.insert(srun.end(), steps.begin(), steps.end());
  const CommandResult result = RunCommand(slurm_->Slurm(srun));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("Slurm environment (SLURM_NODEID 0 of 1 node)"), std::string::npos)
      << result.output;
  const nlohmann::json under_srun = ReadSummary(out_ / "mgpu-run");
  EXPECT_EQ(under_srun["status"], "ok");
  EXPECT_EQ(under_srun["param_checksum"], TorchrunReference(steps)["param_checksum"]);
}

TEST_F(SlurmCluster, AKilledTaskEndsTheJobUnderKillOnBadExitWithinTheCollectiveTimeout) {
  constexpr double kCollectiveTimeout = 60;  // WorkerFlags' --collective-timeout
  std::vector<std::string> srun = {FindProgram("srun"), "-N1", "-n2", "--overcommit", "--kill-on-bad-exit=1", "--chdir", out_.path(),
                                   MGPU_WORKER_BIN};
  for (const auto& flag : WorkerFlags("killed")) srun.push_back(flag);
  srun.insert(srun.end(), {"--epochs", "100000"});
  BackgroundCommand job(slurm_->Slurm(srun));
  const std::string logs = out_ / "killed/logs";
  pid_t victim = -1, survivor = -1;
  ASSERT_TRUE(WaitFor(
      [&] {
        victim = LoggedPid(logs + "/rank-1.log");
        survivor = LoggedPid(logs + "/rank-0.log");
        return victim > 0 && survivor > 0 && LineCount(out_ / "killed/metrics.csv") > 3;
      },
      120))
      << "the job did not start training:\n" << ReadText(logs + "/rank-0.log");
  ::kill(victim, SIGKILL);
  const auto killed_at = Clock::now();
  const CommandResult result = job.Wait();
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  EXPECT_LT(seconds, kCollectiveTimeout) << result.output;
  EXPECT_NE(result.exit_code, 0) << result.output;
  // "task 1: Killed", or "tasks 0-1: Killed" where srun reports both ranks at once.
  EXPECT_TRUE(std::regex_search(result.output, std::regex(R"(tasks? [0-9,-]*\b1\b[0-9,-]*: Killed)")))
      << "srun names the task:\n" << result.output;
  EXPECT_TRUE(WaitFor([&] { return ProcessGone(survivor) && ProcessGone(victim); }, 15))
      << "rank 0 (pid " << survivor << ") outlived the job";
}

TEST_F(SlurmCluster, NodelistExpansionMatchesScontrolShowHostnames) {
  const std::vector<std::string> forms = {
      "vm",           "a,b,c",        "gpu[01-04,07]", "a1,b[2-3]",     "n[8-11]",        "n[008-011]",
      "n[099-101]",   "n[1-02]",      "n[01-2]",       "n[007]",        "n[1-3,5],m",     "n[1-2],n[1-2]",
      "node-[1-2]",   "[1-2]",        "a b",           "a,,b",          "n[1-2]-ib[3-4]", "r[1-2][3-4]",
      "n1[1-2]",      "n[0-0]",       "x-[1-2]-y[08-10],z", slurm_->host()};
  for (const std::string& form : forms) {
    const CommandResult scontrol = RunCommand(slurm_->Slurm({FindProgram("scontrol"), "show", "hostnames", form}));
    ASSERT_EQ(scontrol.exit_code, 0) << form << ": " << scontrol.output;
    std::vector<std::string> expected;
    std::istringstream lines(scontrol.output);
    for (std::string line; std::getline(lines, line);) expected.push_back(line);
    EXPECT_EQ(ExpandSlurmNodelist(form, "SLURM_JOB_NODELIST"), expected) << form;
  }
  // Three groups: Slurm's order differs from every other, but the first host (the master) agrees.
  const CommandResult three = RunCommand(slurm_->Slurm({FindProgram("scontrol"), "show", "hostnames", "n[1-2]a[3,4]b[5-6]"}));
  EXPECT_EQ(ExpandSlurmNodelist("n[1-2]a[3,4]b[5-6]", "SLURM_JOB_NODELIST").front() + "\n",
            three.output.substr(0, three.output.find('\n') + 1));
  // And what a job really gets.
  const CommandResult job = RunCommand(slurm_->Slurm({FindProgram("srun"), "-n1", "printenv", "SLURM_JOB_NODELIST"}));
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(ExpandSlurmNodelist(job.output.substr(0, job.output.find('\n')), "SLURM_JOB_NODELIST"),
            (std::vector<std::string>{slurm_->host()}));
}

TEST_F(SlurmCluster, SbatchInterruptedBeforeItsTimeLimitRequeuesItselfAndResumesToTheUninterruptedChecksum) {
  // Slurm's warning before a time limit (`--signal=USR1@N`) comes whenever slurmctld next checks,
  // 10 to 25 s late, so a run timed to outlast it finished first on a crowded machine, and a slow
  // one drew a signal in every requeued attempt. The test sends the same signal itself, to the same
  // processes (`scancel --signal=USR1`: every task of the job's steps, not the batch shell), once
  // the run has begun, and once only: the job's time limit is far off. The run is long enough
  // that the signal's way through slurmctld and slurmd (a second or two on a crowded machine) ends
  // well before it (390 steps, ~10 s on the 2-core VM).
  constexpr int kTotalSteps = 400;
  constexpr int kSignalAfterSteps = 10;
  TempDir bigger;
  WriteTinyMnistLike(bigger.path(), 5120, 200);
  std::vector<std::string> worker = WorkerFlags("requeued");
  for (size_t i = 0; i + 1 < worker.size(); ++i) {
    if (worker[i] == "--data-dir") worker[i + 1] = bigger.path();
    if (worker[i] == "--batch-size") worker[i + 1] = "256";
  }
  worker.insert(worker.end(), {"--max-steps", std::to_string(kTotalSteps), "--epochs", "1000"});

  // deploy/slurm/ddp-ranks.sbatch as a user submits it, less its GPU, CPU, node and output
  // requests (this one node has no GPU and few cores; the command line asks for one node, two
  // tasks and the output file).
  const std::string script = std::regex_replace(
      ReadText(std::string(MGPU_SOURCE_DIR) + "/deploy/slurm/ddp-ranks.sbatch"),
      std::regex(R"(#SBATCH --(gpus-per-task|cpus-per-task|nodes|ntasks-per-node|output)=[^\n]*\n)"), "");
  WriteBytes(out_ / "ddp-ranks.sbatch", script);
  const std::string worker_bin = MGPU_WORKER_BIN;
  std::vector<std::string> sbatch = {"/usr/bin/env",
                                     "PATH=" + worker_bin.substr(0, worker_bin.rfind('/')) + ":" + std::getenv("PATH"),
                                     FindProgram("sbatch"), "--parsable", "-N1", "-n2", "--time=30",
                                     "--output=" + out_ / "job.out", "--chdir=" + out_.path(), out_ / "ddp-ranks.sbatch"};
  sbatch.insert(sbatch.end(), worker.begin(), worker.end());
  const CommandResult submitted = RunCommand(slurm_->Slurm(sbatch));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string job = submitted.output.substr(0, submitted.output.find_first_of(";\n"));
  const auto job_log = [&] { return PathExists(out_ / "job.out") ? ReadText(out_ / "job.out") : std::string(); };

  // metrics.csv: a header, then a row per step (--log-every 1).
  ASSERT_TRUE(WaitFor([&] { return LineCount(out_ / "requeued/metrics.csv") > kSignalAfterSteps; }, 120))
      << "the job did not reach step " << kSignalAfterSteps << ":\n" << job_log();
  const CommandResult signalled =
      RunCommand(slurm_->Slurm({FindProgram("scancel"), "--signal=USR1", job}));
  ASSERT_EQ(signalled.exit_code, 0) << signalled.output;
  const bool done = WaitFor(
      [&] { return RunCommand(slurm_->Slurm({FindProgram("squeue"), "-h", "-j", job})).output.empty(); }, 150);
  const std::string log = job_log();
  ASSERT_TRUE(done) << "job " << job << " still queued or running 150 s after SIGUSR1:\n" << log;
  EXPECT_NE(log.find("requeueing"), std::string::npos) << "SIGUSR1 did not interrupt the run:\n" << log;
  EXPECT_NE(log.find("resuming from"), std::string::npos) << log;

  const nlohmann::json requeued = ReadSummary(out_ / "requeued");
  EXPECT_EQ(requeued["status"], "ok") << log;
  EXPECT_EQ(requeued["steps"], kTotalSteps);
  // The same run never interrupted: the same two ranks under torchrun's environment.
  for (size_t i = 0; i + 1 < worker.size(); ++i) {
    if (worker[i] == "--out") worker[i + 1] = out_ / "whole";
  }
  const int port = FreeLocalPort();
  std::vector<std::unique_ptr<BackgroundCommand>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> argv = {MGPU_WORKER_BIN};
    argv.insert(argv.end(), worker.begin(), worker.end());
    ranks.push_back(std::make_unique<BackgroundCommand>(argv, TorchrunEnvironment(rank, 2, port)));
  }
  for (auto& rank : ranks) {
    const CommandResult result = rank->Wait();
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  EXPECT_EQ(requeued["param_checksum"], ReadSummary(out_ / "whole")["param_checksum"])
      << "the requeued and resumed run must end as the uninterrupted one:\n" << log;
}

}  // namespace
}  // namespace mgpu
