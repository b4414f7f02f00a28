#include "ddp/bucket_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace mgpu {

BucketPlan PlanBuckets(const std::vector<ParameterSlot>& slots, const std::vector<size_t>& order,
                       int64_t first_cap_bytes, int64_t cap_bytes) {
  std::vector<bool> seen(slots.size(), false);
  if (order.size() != slots.size()) throw std::invalid_argument("bucket order must list every parameter once");
  for (size_t index : order) {
    if (index >= slots.size() || seen[index]) throw std::invalid_argument("bucket order must list every parameter once");
    seen[index] = true;
  }
  // As c10d's compute_bucket_assignment_by_size: one open bucket per group; a bucket closes
  // once it reaches its limit, which is the first-bucket cap for a group's first bucket.
  struct Open {
    std::vector<size_t> members;
    int64_t bytes = 0;
    bool closed_one = false;
  };
  std::map<std::string, Open> open;
  BucketPlan plan;
  for (size_t index : order) {
    Open& bucket = open[slots[index].group];
    bucket.members.push_back(index);
    bucket.bytes += slots[index].bytes;
    if (bucket.bytes >= (bucket.closed_one ? cap_bytes : first_cap_bytes)) {
      plan.buckets.push_back(std::move(bucket.members));
      bucket.members.clear();
      bucket.bytes = 0;
      bucket.closed_one = true;
    }
  }
  // Close the remaining buckets in the order their first member appeared.
  std::vector<std::vector<size_t>> rest;
  for (auto& [group, bucket] : open) {
    if (!bucket.members.empty()) rest.push_back(std::move(bucket.members));
  }
  std::vector<size_t> position(slots.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::sort(rest.begin(), rest.end(), [&](const auto& a, const auto& b) { return position[a[0]] < position[b[0]]; });
  for (auto& bucket : rest) plan.buckets.push_back(std::move(bucket));
  return plan;
}

}  // namespace mgpu
