// How DDP groups gradients into all-reduce buckets, as PyTorch's c10d reducer does.
//
// Parameters are visited in the given order (reverse registration order at first, since
// backward produces the last layers' gradients first; later the order gradients actually became
// ready). Parameters of the same dtype and device fill a bucket until it reaches its cap, so a
// bucket may pass the cap by its last parameter; a group's first bucket has a small cap (1 MiB)
// so that the first all-reduce starts early in backward, later ones the larger cap (25 MiB by
// default). Buckets are listed in the order they closed; leftovers last, by first member.
//
// Beyond c10d: a group's last bucket can only be launched once backward is over, so its whole
// all-reduce is exposed. With a last-bucket cap, the group's last-ready parameters up to that
// many bytes (at least one parameter) form a bucket of their own, launched last, and the bucket
// before it is launched while the earliest layers' backward still runs. 0 turns this off.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu {

struct ParameterSlot {
  int64_t bytes = 0;
  std::string group;  // dtype and device, e.g. "Float@cuda:0": buckets never mix groups
};

struct BucketPlan {
  std::vector<std::vector<size_t>> buckets;  // parameter indices, in bucket order
};

constexpr int64_t kFirstBucketCapBytes = int64_t{1} << 20;
constexpr int64_t kDefaultBucketCapBytes = int64_t{25} << 20;

// `order` lists every index of `slots` once. Throws std::invalid_argument otherwise.
BucketPlan PlanBuckets(const std::vector<ParameterSlot>& slots, const std::vector<size_t>& order,
                       int64_t first_cap_bytes, int64_t cap_bytes, int64_t last_cap_bytes);

}  // namespace mgpu
