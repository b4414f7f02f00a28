// CollectiveTracker: what a rank reports as the collective it waits in.
#include "ddp/collective_tracker.h"

#include <thread>

#include <gtest/gtest.h>

namespace mgpu {
namespace {

TEST(CollectiveTracker, ReportsNothingWhenNoCollectiveIsOutstanding) {
  CollectiveTracker tracker;
  EXPECT_FALSE(tracker.Oldest().has_value());
  { CollectiveTracker::Token done = tracker.Begin("all-reduce of bucket 0"); }
  EXPECT_FALSE(tracker.Oldest().has_value()) << "a destroyed token ends its collective";
}

TEST(CollectiveTracker, ReportsTheOldestOutstandingCollectiveWithItsAge) {
  CollectiveTracker tracker;
  CollectiveTracker::Token first = tracker.Begin("all-reduce of bucket 0");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CollectiveTracker::Token second = tracker.Begin("all-reduce of bucket 1");
  ASSERT_TRUE(tracker.Oldest().has_value());
  EXPECT_EQ(tracker.Oldest()->what, "all-reduce of bucket 0");
  EXPECT_GE(tracker.Oldest()->seconds, 0.02);
  first.Done();
  EXPECT_EQ(tracker.Oldest()->what, "all-reduce of bucket 1");
  first.Done();  // twice is harmless
  second.Done();
  EXPECT_FALSE(tracker.Oldest().has_value());
}

TEST(CollectiveTracker, AMovedTokenEndsTheCollectiveOnceAndMayOutliveTheTracker) {
  CollectiveTracker::Token kept;
  {
    CollectiveTracker tracker;
    CollectiveTracker::Token token = tracker.Begin("broadcast of buffers");
    kept = std::move(token);
    token.Done();  // moved from: ends nothing
    EXPECT_EQ(tracker.Oldest()->what, "broadcast of buffers");
    CollectiveTracker::Token other = tracker.Begin("barrier start");
    other = std::move(kept);  // assigning ends the collective `other` held
    EXPECT_EQ(tracker.Oldest()->what, "broadcast of buffers");
    kept = std::move(other);
  }
  kept.Done();  // the tracker is gone; its state lives on with the token
}

}  // namespace
}  // namespace mgpu
