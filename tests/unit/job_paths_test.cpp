// Where a job of mgpu serve may read and write (launcher/serve/job_paths.h), as the attacks of issue 34
// tried it: every path option is checked after {out}, `..`, relative paths (from the job folder,
// never the service's working folder) and symlinks are resolved; outputs go only to the job
// folder and --allow-path folders; plugins need --allow-plugins and an allowed folder. Each
// refused submission names the option, the path and the allowed folders, and leaves no folder.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fmt/format.h>

#include "common/files.h"
#include "launcher/serve/job_paths.h"
#include "launcher/serve/job_submission.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

TEST(ResolvePath, FollowsDotsRelativePathsAndSymlinksAsTheKernelWould) {
  TempDir dir;
  const std::string root = ResolvePath(dir.path(), "/");
  MakeDirectories(dir / "job/run");
  MakeDirectories(dir / "elsewhere");
  ASSERT_EQ(::symlink((dir / "elsewhere").c_str(), (dir / "job/link").c_str()), 0);
  EXPECT_EQ(ResolvePath("run/x", dir / "job"), root + "/job/run/x") << "relative: from the base";
  EXPECT_EQ(ResolvePath(dir / "job/run/../../escape", "/"), root + "/escape");
  EXPECT_EQ(ResolvePath(dir / "job/link/new/file", "/"), root + "/elsewhere/new/file") << "a symlink, then new parts";
  EXPECT_EQ(ResolvePath(dir / "job/link/..", "/"), root) << "`..` of a symlink is its target's parent";
  EXPECT_EQ(ResolvePath("./a/./b/", "/x"), "/x/a/b");
  ASSERT_EQ(::symlink((dir / "nothing-here").c_str(), (dir / "job/dangling").c_str()), 0);
  EXPECT_NE(BadInputMessage([&] { ResolvePath(dir / "job/dangling", "/"); }).find("a symlink to nothing"),
            std::string::npos)
      << "writing a dangling symlink would create its target, wherever it is";
  ASSERT_EQ(::symlink((dir / "job/loop").c_str(), (dir / "job/loop").c_str()), 0);
  EXPECT_NE(BadInputMessage([&] { ResolvePath(dir / "job/loop/x", "/"); }).find("cannot be resolved"),
            std::string::npos);
  EXPECT_TRUE(IsWithin("/a/b", "/a"));
  EXPECT_TRUE(IsWithin("/a", "/a"));
  EXPECT_FALSE(IsWithin("/ab", "/a")) << "a sibling sharing a prefix is outside";
}

class JobPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteTinyMnistLike(data_ / "mnist", 64, 32);
    MakeDirectories(shared_ / "out");
    MakeDirectories(outside_ / "secrets");
    WriteBytes(outside_ / "secrets/important.conf", "keep me\n");
    paths_.read_write = {AllowedFolder(shared_ / "out", "--allow-path")};
    paths_.read_only = {AllowedFolder(data_.path(), "--allow-read")};
  }

  JobRecord Prepare(const std::string& extra) {
    Submission submission;
    submission.config_yaml = "data-dir: " + data_ / "mnist" + "\ndevice: cpu\n" + extra;
    submission.config_name = "job.yaml";
    return PrepareJob(7, submission, Job(), ParseDeviceSlots("cpu,cpu", 0), 0, paths_);
  }
  std::string Refusal(const std::string& extra) {
    const std::string message = BadInputMessage([&] { Prepare(extra); });
    EXPECT_FALSE(PathExists(Job())) << "a refused job leaves no folder";
    return message;
  }
  std::string Job() const { return state_ / "jobs/7"; }

  TempDir data_, shared_, outside_, state_;
  PathPolicy paths_;
};

TEST_F(JobPaths, ACheckpointOutsideTheAllowedFoldersIsRefusedNamingTheOptionAndTheRoots) {
  const std::string message = Refusal("checkpoint: " + outside_ / "secrets" + "\ncheckpoint-name: important.conf\n");
  EXPECT_NE(message.find("'checkpoint: " + outside_ / "secrets" + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("outside the folders this job may write"), std::string::npos) << message;
  EXPECT_NE(message.find(ResolvePath(shared_ / "out", "/")), std::string::npos) << "names the roots: " << message;
  EXPECT_NE(message.find("--allow-path"), std::string::npos) << message;
  EXPECT_EQ(ReadText(outside_ / "secrets/important.conf"), "keep me\n");
}

TEST_F(JobPaths, OutputPlaceholderDotsCannotClimbOutOfTheJobFolder) {
  const std::string message = Refusal("checkpoint: \"{out}/../../../escape\"\n");
  EXPECT_NE(message.find("resolves to " + ResolvePath(state_.path(), "/") + "/escape"), std::string::npos) << message;
  EXPECT_NO_THROW(Prepare("checkpoint: \"{out}/weights\"\n")) << "inside the output folder";
  RemoveTree(Job());
  EXPECT_NO_THROW(Prepare("checkpoint: " + shared_ / "out/run7" + "\n")) << "inside an --allow-path folder";
}

TEST_F(JobPaths, RelativePathsAreTakenFromTheJobFolderNotTheServicesWorkingFolder) {
  const std::string message = Refusal("tensorboard-log: ../../../x\n");
  EXPECT_NE(message.find("'tensorboard-log: ../../../x'"), std::string::npos) << message;
  const JobRecord job = Prepare("tensorboard-log: tb\n");
  const std::string args = fmt::format("{}", fmt::join(job.worker_args, " "));
  EXPECT_NE(args.find("--tensorboard-log " + Job() + "/tb"), std::string::npos)
      << "passed as an absolute path, so the job uses what was checked: " << args;
}

TEST_F(JobPaths, ASymlinkOutOfAnAllowedFolderIsRefused) {
  ASSERT_EQ(::symlink((outside_ / "secrets").c_str(), (shared_ / "out/escape").c_str()), 0);
  const std::string message = Refusal("tensorboard-log: " + shared_ / "out/escape" + "\n");
  EXPECT_NE(message.find("resolves to " + ResolvePath(outside_ / "secrets", "/")), std::string::npos) << message;
}

TEST_F(JobPaths, EveryPathOptionIsChecked) {
  EXPECT_NE(Refusal("memory-snapshot: " + outside_ / "snap.pickle" + "\n").find("'memory-snapshot:"),
            std::string::npos);
  EXPECT_NE(Refusal("resume: " + outside_ / "secrets/important.conf" + "\n").find("may read"), std::string::npos);
  // data-dir alone: Prepare's configuration sets one already, and a key given twice is refused.
  const auto data_dir_refusal = [&](const std::string& data_dir) {
    return BadInputMessage([&] {
      Submission submission;
      submission.config_yaml = "data-dir: " + data_dir + "\n";
      PrepareJob(7, submission, Job(), ParseDeviceSlots("cpu,cpu", 0), 0, paths_);
    });
  };
  const std::string data = data_dir_refusal(outside_ / "secrets");
  EXPECT_NE(data.find("'data-dir: " + outside_ / "secrets" + "'"), std::string::npos) << data;
  EXPECT_NE(data_dir_refusal(shared_ / "out/../../").find("'data-dir:"), std::string::npos);
  EXPECT_NE(Refusal("checkpoint-name: ../important.conf\n").find("is not a file name"), std::string::npos);
  EXPECT_NE(Refusal("checkpoint-name: ..\n").find("is not a file name"), std::string::npos);
  // The option table marks every path option; none is missed by the check.
  std::vector<std::string> checked;
  for (const OptionSpec& spec : TrainOptions()) {
    if (spec.path_use != PathUse::kNone) checked.push_back(spec.name);
  }
  EXPECT_EQ(checked, (std::vector<std::string>{"model", "data-dir", "memory-snapshot", "resume", "out",
                                               "tensorboard-log", "checkpoint"}));
}

TEST_F(JobPaths, ModelsLoadOnlyFromAllowedFoldersAndPluginsOnlyWhenTurnedOn) {
  WriteBytes(data_ / "model.pt", "not really a module");
  WriteBytes(outside_ / "model.pt", "not really a module");
  WriteBytes(data_ / "evil.so", "not really a library");
  EXPECT_NE(Refusal("model: torchscript:" + outside_ / "model.pt" + "\n").find("load models from"), std::string::npos);
  const std::string plugin = Refusal("model: plugin:" + data_ / "evil.so" + ":x\n");
  EXPECT_NE(plugin.find("loads no plugins"), std::string::npos) << plugin;
  EXPECT_NE(plugin.find("--allow-plugins"), std::string::npos) << plugin;
  paths_.plugins = true;
  EXPECT_NE(Refusal("model: plugin:" + outside_ / "evil.so" + ":x\n").find("load models from"), std::string::npos)
      << "plugins on, but not from any folder";
  // A job's own folder is not a model folder: the job writes there.
  EXPECT_NE(Refusal("model: plugin:run/evil.so:x\n").find("load models from"), std::string::npos);
}

}  // namespace
}  // namespace mgpu
