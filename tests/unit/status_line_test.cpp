// Specification of `mgpu watch`'s status line (launcher/serve/status_line.h).
#include <gtest/gtest.h>

#include "launcher/serve/status_line.h"

namespace mgpu {
namespace {

TEST(StatusLine, OnATerminalEachUpdateReplacesTheLineInPlace) {
  StatusLine line(/*terminal=*/true);
  EXPECT_EQ(line.Show("job 1 running: step 10"), "\rjob 1 running: step 10\x1b[K");
  EXPECT_EQ(line.Show("job 1 running: step 20"), "\rjob 1 running: step 20\x1b[K");
  EXPECT_EQ(line.Finish(), "\n") << "the shell's prompt must not land on the status line";
  EXPECT_EQ(line.Finish(), "");
}

TEST(StatusLine, ElsewhereEachUpdateIsALineOfItsOwn) {
  StatusLine line(/*terminal=*/false);
  EXPECT_EQ(line.Show("job 1 queued"), "job 1 queued\n");
  EXPECT_EQ(line.Show("job 1 running: step 10"), "job 1 running: step 10\n");
  EXPECT_EQ(line.Finish(), "");
}

}  // namespace
}  // namespace mgpu
