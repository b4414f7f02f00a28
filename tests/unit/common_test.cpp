// common/: splitting lists, giving a file a second name, and the stop signals' helpers.
#include <gtest/gtest.h>
#include <chrono>
#include <set>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/server_ports.h"
#include "common/split.h"
#include "common/stop_signal.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using testing::TempDir;

ino_t Inode(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_ino;
}

TEST(SplitAt, KeepsEmptyPiecesSoCallersCanRefuseThem) {
  EXPECT_EQ(SplitAt("cuda:0,cuda:1", ','), (std::vector<std::string>{"cuda:0", "cuda:1"}));
  EXPECT_EQ(SplitAt("a,,b,", ','), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(SplitAt("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(SplitAt("no separator", ','), (std::vector<std::string>{"no separator"}));
}

TEST(ServerPorts, ReadsTheKernelsEphemeralRangeAndRefusesAnythingElse) {
  const std::optional<PortRange> range = ParsePortRange("32768\t60999\n");
  ASSERT_TRUE(range.has_value());
  EXPECT_EQ(range->low, 32768);
  EXPECT_EQ(range->high, 60999);
  for (const std::string bad : {"", "32768", "60999 32768", "0 100", "1024 70000", "1024 2048 4096", "a b"}) {
    EXPECT_FALSE(ParsePortRange(bad).has_value()) << bad;
  }
  const PortRange here = EphemeralPorts();
  EXPECT_LE(here.low, here.high);
}

TEST(ServerPorts, CandidatesAreDistinctUnprivilegedAndBelowTheEphemeralRange) {
  const std::vector<int> ports = ServerPortCandidates(PortRange{32768, 60999}, 64);
  ASSERT_EQ(ports.size(), 64u);
  for (const int port : ports) {
    EXPECT_GE(port, 16384);  // half of the range's start: past well-known services' ports
    EXPECT_LT(port, 32768);
    EXPECT_TRUE(port < 20000 || port > 29999) << port << " is where Slurm steps and torch.distributed listen";
  }
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), ports.size());
  // A range that starts low leaves fewer candidates, never a privileged port; none at all below 1025.
  const std::vector<int> few = ServerPortCandidates(PortRange{1030, 60999}, 64);
  EXPECT_EQ(few.size(), 6u);
  for (const int port : few) EXPECT_GE(port, 1024);
  EXPECT_TRUE(ServerPortCandidates(PortRange{1024, 60999}, 64).empty());
}

TEST(HangUpIsIgnored, FollowsSighupsActionSoNohupsChoiceIsKept) {
  struct sigaction saved {};
  ASSERT_EQ(::sigaction(SIGHUP, nullptr, &saved), 0);
  ::signal(SIGHUP, SIG_IGN);  // as nohup starts a program
  EXPECT_TRUE(HangUpIsIgnored());
  ::signal(SIGHUP, SIG_DFL);
  EXPECT_FALSE(HangUpIsIgnored());
  ::sigaction(SIGHUP, &saved, nullptr);
}

TEST(SignalName, NamesKnownSignalsAndNumbersTheRest) {
  EXPECT_EQ(SignalName(SIGHUP), "SIGHUP");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(250), "signal 250");
}

TEST(LinkOrWriteAtomically, GivesTheFileASecondNameOnOneFileSystem) {
  TempDir dir;
  WriteFileAtomically(dir / "weights.pt", "tensors");
  WriteFileAtomically(dir / "old.pth", "an earlier run's");
  EXPECT_TRUE(LinkOrWriteAtomically(dir / "weights.pt", dir / "old.pth", "tensors"));
  EXPECT_EQ(Inode(dir / "old.pth"), Inode(dir / "weights.pt")) << "one copy on disk";
  EXPECT_EQ(ReadFile(dir / "old.pth"), "tensors");
  EXPECT_EQ(ListDirectory(dir.path()), (std::vector<std::string>{"old.pth", "weights.pt"})) << "no temporary left";
}

TEST(LinkOrWriteAtomically, ANameThatIsAlreadyTheFilesLeavesNoTemporary) {
  TempDir dir;
  WriteFileAtomically(dir / "weights.pt", "tensors");
  EXPECT_TRUE(LinkOrWriteAtomically(dir / "weights.pt", dir / "weights.pt", "tensors"));
  EXPECT_EQ(ListDirectory(dir.path()), (std::vector<std::string>{"weights.pt"}));
  EXPECT_EQ(ReadFile(dir / "weights.pt"), "tensors");
}

TEST(LinkOrWriteAtomically, WritesACopyWhereNoLinkCanBeMade) {
  TempDir dir;
  // A name that cannot be linked to: the file to link does not exist, as where it lies on another
  // file system, so the bytes are written instead.
  EXPECT_FALSE(LinkOrWriteAtomically(dir / "missing.pt", dir / "copy.pth", "tensors"));
  EXPECT_EQ(ReadFile(dir / "copy.pth"), "tensors");
}

// The tests' own helper for processes that may hang: it kills one that outlives its time and keeps
// what it printed; one that ends in time keeps its exit code.
TEST(BackgroundCommand, WaitAtMostKillsAProcessThatOutlivesItAndKeepsItsOutput) {
  const auto start = std::chrono::steady_clock::now();
  testing::BackgroundCommand hung({"sh", "-c", "echo started; exec sleep 60"});
  const testing::CommandResult result = hung.WaitAtMost(1);
  EXPECT_EQ(result.exit_code, 128 + 9);
  EXPECT_EQ(result.output, "started\n");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  testing::BackgroundCommand quick({"sh", "-c", "echo done; exit 3"});
  const testing::CommandResult ended = quick.WaitAtMost(60);
  EXPECT_EQ(ended.exit_code, 3);
  EXPECT_EQ(ended.output, "done\n");
}

}  // namespace
}  // namespace mgpu
