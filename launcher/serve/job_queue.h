// The order in which `mgpu serve` starts queued jobs, as pure logic (no processes, no clock).
//
// Queue order: higher priority first, then submission order (lower id first). The job at the
// head of the queue starts as soon as the free device slots cover its device count, on the
// lowest-numbered free slots; then the next one, and so on.
//
// No backfill: a job that does not fit blocks every job behind it, even smaller ones that would
// fit now. Without run-time estimates, letting small jobs pass can keep a large job waiting for
// ever (there is always some small job holding a device); with strict order a job starts as soon
// as the jobs ahead of it and the devices allow, and what happens is easy to predict from the
// queue alone. The price is idle devices while a large job waits for the last ones.
#pragma once

#include <cstdint>
#include <vector>

namespace mgpu {

struct QueuedJob {
  int64_t id = 0;    // submission order
  int priority = 0;  // higher first
  int devices = 1;   // slots the job needs
};

struct Placement {
  int64_t id = 0;
  std::vector<int> slots;  // ascending
};

// `jobs` sorted into queue order.
std::vector<QueuedJob> QueueOrder(std::vector<QueuedJob> jobs);

// The jobs of `queued` (any order) that start now, in queue order, given which slots are free
// (`free[i]`: slot i). Stops at the first job that does not fit (no backfill).
std::vector<Placement> PlanStarts(const std::vector<QueuedJob>& queued, std::vector<bool> free);

}  // namespace mgpu
