// mgpu serve's scheduler: priority first, then submission order; the head of the queue starts
// on the lowest free slots as soon as they cover it; nothing passes a job that does not fit.
#include <gtest/gtest.h>

#include "launcher/serve/job_queue.h"

namespace mgpu {
namespace {

std::vector<int64_t> Ids(const std::vector<QueuedJob>& jobs) {
  std::vector<int64_t> ids;
  for (const auto& job : jobs) ids.push_back(job.id);
  return ids;
}

std::vector<int64_t> Ids(const std::vector<Placement>& starts) {
  std::vector<int64_t> ids;
  for (const auto& start : starts) ids.push_back(start.id);
  return ids;
}

TEST(JobQueue, OrdersByPriorityThenSubmission) {
  const std::vector<QueuedJob> order = QueueOrder({{5, 0, 1}, {2, 0, 1}, {7, 3, 1}, {3, -1, 1}, {4, 3, 1}});
  EXPECT_EQ(Ids(order), (std::vector<int64_t>{4, 7, 2, 5, 3}));
}

TEST(JobQueue, JobsThatFitStartTogetherOnTheLowestFreeSlots) {
  const std::vector<Placement> starts = PlanStarts({{1, 0, 1}, {2, 0, 1}, {3, 0, 2}}, {true, true});
  ASSERT_EQ(Ids(starts), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(starts[0].slots, std::vector<int>{0});
  EXPECT_EQ(starts[1].slots, std::vector<int>{1});
}

TEST(JobQueue, AJobTakesFreeSlotsWhereverTheyAre) {
  const std::vector<Placement> starts = PlanStarts({{9, 0, 2}}, {false, true, false, true});
  ASSERT_EQ(Ids(starts), std::vector<int64_t>{9});
  EXPECT_EQ(starts[0].slots, (std::vector<int>{1, 3}));
}

TEST(JobQueue, ABlockedJobBlocksSmallerOnesBehindItNoBackfill) {
  // Job 3 needs both slots and one is busy: job 4 would fit on the free one, but waits its turn.
  EXPECT_TRUE(PlanStarts({{3, 0, 2}, {4, 0, 1}}, {true, false}).empty());
  // Once both slots are free, job 3 starts, and job 4 still waits (nothing is left).
  EXPECT_EQ(Ids(PlanStarts({{3, 0, 2}, {4, 0, 1}}, {true, true})), std::vector<int64_t>{3});
}

TEST(JobQueue, AHigherPriorityJobGoesFirstEvenIfSubmittedLater) {
  EXPECT_EQ(Ids(PlanStarts({{1, 0, 2}, {2, 5, 1}}, {true, true})), std::vector<int64_t>{2})
      << "job 2 takes one slot; job 1 needs two and waits";
}

TEST(JobQueue, NothingStartsWithoutFreeSlotsOrJobs) {
  EXPECT_TRUE(PlanStarts({{1, 0, 1}}, {false, false}).empty());
  EXPECT_TRUE(PlanStarts({}, {true, true}).empty());
}

}  // namespace
}  // namespace mgpu
