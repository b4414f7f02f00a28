#include "ddp/bucket_plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace mgpu {
namespace {

// The group's last-ready members up to `last_cap_bytes` (at least one), in `order`'s order.
std::map<std::string, std::vector<size_t>> LastBuckets(const std::vector<ParameterSlot>& slots,
                                                       const std::vector<size_t>& order, int64_t last_cap_bytes) {
  std::map<std::string, std::vector<size_t>> tails;
  if (last_cap_bytes <= 0) return tails;
  std::map<std::string, int64_t> tail_bytes;
  std::map<std::string, bool> full;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ParameterSlot& slot = slots[*it];
    if (full[slot.group]) continue;
    std::vector<size_t>& tail = tails[slot.group];
    if (!tail.empty() && tail_bytes[slot.group] + slot.bytes > last_cap_bytes) {
      full[slot.group] = true;
      continue;
    }
    tail.push_back(*it);
    tail_bytes[slot.group] += slot.bytes;
  }
  for (auto& [group, tail] : tails) std::reverse(tail.begin(), tail.end());
  return tails;
}

}  // namespace

BucketPlan PlanBuckets(const std::vector<ParameterSlot>& slots, const std::vector<size_t>& order,
                       int64_t first_cap_bytes, int64_t cap_bytes, int64_t last_cap_bytes) {
  std::vector<bool> seen(slots.size(), false);
  if (order.size() != slots.size()) throw std::invalid_argument("bucket order must list every parameter once");
  for (size_t index : order) {
    if (index >= slots.size() || seen[index]) throw std::invalid_argument("bucket order must list every parameter once");
    seen[index] = true;
  }
  std::map<std::string, std::vector<size_t>> tails = LastBuckets(slots, order, last_cap_bytes);
  std::vector<bool> in_tail(slots.size(), false);
  std::map<std::string, size_t> group_size;
  for (size_t index : order) ++group_size[slots[index].group];
  for (auto it = tails.begin(); it != tails.end();) {
    if (it->second.size() == group_size[it->first]) {
      it = tails.erase(it);  // the whole group fits: one bucket, planned as usual
      continue;
    }
    for (size_t index : it->second) in_tail[index] = true;
    ++it;
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
    if (in_tail[index]) continue;
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
  // Close the remaining buckets in the order their first member appeared, then the last buckets
  // the same way.
  std::vector<size_t> position(slots.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  auto by_first_member = [&](const auto& a, const auto& b) { return position[a[0]] < position[b[0]]; };
  std::vector<std::vector<size_t>> rest, last;
  for (auto& [group, bucket] : open) {
    if (!bucket.members.empty()) rest.push_back(std::move(bucket.members));
  }
  for (auto& [group, tail] : tails) last.push_back(std::move(tail));
  std::sort(rest.begin(), rest.end(), by_first_member);
  std::sort(last.begin(), last.end(), by_first_member);
  for (auto& bucket : rest) plan.buckets.push_back(std::move(bucket));
  for (auto& bucket : last) plan.buckets.push_back(std::move(bucket));
  return plan;
}

}  // namespace mgpu
