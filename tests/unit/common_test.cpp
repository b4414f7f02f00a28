// common/: splitting lists and giving a file a second name.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/split.h"
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

}  // namespace
}  // namespace mgpu
