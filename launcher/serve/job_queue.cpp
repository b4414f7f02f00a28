#include "launcher/serve/job_queue.h"

#include <algorithm>

namespace mgpu {

std::vector<QueuedJob> QueueOrder(std::vector<QueuedJob> jobs) {
  std::sort(jobs.begin(), jobs.end(), [](const QueuedJob& a, const QueuedJob& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.id < b.id;
  });
  return jobs;
}

std::vector<Placement> PlanStarts(const std::vector<QueuedJob>& queued, std::vector<bool> free) {
  std::vector<Placement> starts;
  for (const QueuedJob& job : QueueOrder(queued)) {
    Placement placement{job.id, {}};
    for (size_t slot = 0; slot < free.size() && static_cast<int>(placement.slots.size()) < job.devices; ++slot) {
      if (free[slot]) placement.slots.push_back(static_cast<int>(slot));
    }
    if (job.devices < 1 || static_cast<int>(placement.slots.size()) < job.devices) break;
    for (int slot : placement.slots) free[static_cast<size_t>(slot)] = false;
    starts.push_back(std::move(placement));
  }
  return starts;
}

}  // namespace mgpu
