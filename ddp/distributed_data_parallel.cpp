#include "ddp/distributed_data_parallel.h"

#include <algorithm>
#include <map>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return shape.empty() ? "scalar" : fmt::format("{}", fmt::join(shape, "x"));
}

// Flattens same-dtype tensors into one buffer, runs `collective` on it, and copies back.
void Coalesced(const std::vector<torch::Tensor>& tensors, const std::function<void(torch::Tensor&)>& collective) {
  std::map<torch::ScalarType, std::vector<torch::Tensor>> by_type;
  for (const auto& t : tensors) by_type[t.scalar_type()].push_back(t);
  for (auto& [type, group] : by_type) {
    std::vector<torch::Tensor> flat;
    for (const auto& t : group) flat.push_back(t.detach().reshape(-1));
    torch::Tensor buffer = torch::cat(flat);
    collective(buffer);
    int64_t offset = 0;
    for (auto& t : group) {
      t.detach().copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                 Communicator& communicator, DdpOptions options)
    : module_(std::move(module)),
      communicator_(communicator),
      options_(std::move(options)) {
  for (auto& item : module_->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    names_.push_back(item.key());
    parameters_.push_back(item.value());
  }
  for (auto& buffer : module_->buffers()) buffers_.push_back(buffer);
  VerifyAcrossRanks();
  std::vector<torch::Tensor> state = parameters_;
  state.insert(state.end(), buffers_.begin(), buffers_.end());
  BroadcastFromRankZero(state, "initial parameters and buffers");
  if (options_.broadcast_buffers && !buffers_.empty() && communicator_.size() > 1) {
    torch::NoGradGuard no_grad;
    flat_buffers_ = std::make_unique<FlatBuffers>(buffers_, buffers_[0].device());
    flat_buffers_->Pack(buffers_);
    for (size_t k = 0; k < buffers_.size(); ++k) buffers_[k].set_data(flat_buffers_->views()[k]);
  }
  std::vector<size_t> reverse_order;
  for (size_t i = parameters_.size(); i-- > 0;) reverse_order.push_back(i);
  BuildBuckets(reverse_order);
  RegisterHooks();
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

// Every rank all-gathers a description of every rank's parameters and finds the first
// difference from rank 0, so every rank raises the same error at the same time.
void DistributedDataParallel::VerifyAcrossRanks() {
  // Per parameter: dtype, number of dimensions, dimensions.
  std::vector<int64_t> signature = {static_cast<int64_t>(parameters_.size())};
  for (const auto& p : parameters_) {
    signature.push_back(static_cast<int64_t>(p.scalar_type()));
    signature.push_back(p.dim());
    for (int64_t d : p.sizes()) signature.push_back(d);
  }
  const auto options = torch::TensorOptions().dtype(torch::kLong).device(parameters_.empty() ? torch::kCPU : parameters_[0].device());
  const int size = communicator_.size();
  torch::Tensor length = torch::tensor({static_cast<int64_t>(signature.size())}, options);
  torch::Tensor lengths = torch::empty({size}, options);
  communicator_.AllGather(lengths, length, "parameter signature lengths")->WaitForHost();
  const int64_t longest = lengths.max().item<int64_t>();
  signature.resize(static_cast<size_t>(longest), -1);
  torch::Tensor mine = torch::tensor(signature, options);
  torch::Tensor all = torch::empty({size, longest}, options);
  communicator_.AllGather(all, mine, "parameter signatures")->WaitForHost();
  all = all.cpu();

  auto parse = [&](int r) {
    std::vector<std::pair<int64_t, std::vector<int64_t>>> params;  // dtype, shape
    const int64_t* row = all[r].data_ptr<int64_t>();
    size_t at = 1;
    for (int64_t i = 0; i < row[0]; ++i) {
      const int64_t dtype = row[at], dims = row[at + 1];
      params.emplace_back(dtype, std::vector<int64_t>(row + at + 2, row + at + 2 + dims));
      at += 2 + static_cast<size_t>(dims);
    }
    return params;
  };
  const auto reference = parse(0);
  for (int r = 1; r < size; ++r) {
    const auto other = parse(r);
    for (size_t i = 0; i < std::min(reference.size(), other.size()); ++i) {
      if (reference[i] == other[i]) continue;
      const std::string name = i < names_.size() ? names_[i] : "#" + std::to_string(i);
      throw BadInputError(fmt::format(
          "DDP needs the same model on every rank: parameter {} '{}' is {} {} on rank 0 but {} {} on rank {}; "
          "start every rank with the same --model and data set",
          i, name, ShapeText(reference[i].second), c10::toString(static_cast<torch::ScalarType>(reference[i].first)),
          ShapeText(other[i].second), c10::toString(static_cast<torch::ScalarType>(other[i].first)), r));
    }
    if (reference.size() != other.size()) {
      throw BadInputError(fmt::format("DDP needs the same model on every rank: rank 0 has {} parameters, rank {} "
                                      "has {}; start every rank with the same --model",
                                      reference.size(), r, other.size()));
    }
  }
}

void DistributedDataParallel::BroadcastFromRankZero(const std::vector<torch::Tensor>& tensors, const std::string& what) {
  torch::NoGradGuard no_grad;
  Coalesced(tensors, [&](torch::Tensor& flat) { communicator_.Broadcast(flat, 0, what)->Wait(); });
}

void DistributedDataParallel::BuildBuckets(const std::vector<size_t>& order) {
  std::vector<ParameterSlot> slots;
  for (const auto& p : parameters_) {
    slots.push_back({static_cast<int64_t>(p.numel() * p.element_size()),
                     std::string(c10::toString(p.scalar_type())) + "@" + p.device().str()});
  }
  const BucketPlan plan = PlanBuckets(slots, order, options_.first_bucket_cap_bytes, options_.bucket_cap_bytes,
                                      options_.last_bucket_cap_bytes);
  std::vector<Bucket> buckets(plan.buckets.size());
  locations_.assign(parameters_.size(), Location{});
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.members = plan.buckets[b];
    int64_t total = 0;
    for (size_t i : bucket.members) total += parameters_[i].numel();
    const torch::Tensor& first = parameters_[bucket.members.front()];
    bucket.contents = torch::zeros({total}, first.options().requires_grad(false));
    int64_t offset = 0;
    for (size_t slot = 0; slot < bucket.members.size(); ++slot) {
      const torch::Tensor& p = parameters_[bucket.members[slot]];
      // With the parameter's strides where it is dense (channels-last weights), so a gradient
      // living in the bucket has its parameter's layout, as fused optimizers require.
      bucket.views.push_back(p.is_non_overlapping_and_dense()
                                 ? bucket.contents.as_strided(p.sizes(), p.strides(), offset)
                                 : bucket.contents.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
      locations_[bucket.members[slot]] = Location{b, slot};
    }
  }
  if (options_.gradient_as_bucket_view) {
    torch::NoGradGuard no_grad;
    for (size_t b = 0; b < buckets.size(); ++b) {
      for (size_t slot = 0; slot < buckets[b].members.size(); ++slot) {
        torch::Tensor& grad = parameters_[buckets[b].members[slot]].mutable_grad();
        if (grad.defined()) buckets[b].views[slot].copy_(grad);
        grad = buckets[b].views[slot];
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  buckets_ = std::move(buckets);
  ResetIteration();
}

void DistributedDataParallel::RegisterHooks() {
  gradient_leaves_ = parameters_;
  accumulators_.resize(parameters_.size());
  hook_keys_.resize(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) HookGradientOf(i);
}

// Parameter `index`'s gradient is ready when its leaf's AccumulateGrad has run.
void DistributedDataParallel::HookGradientOf(size_t index) {
  accumulators_[index] = torch::autograd::impl::grad_accumulator(gradient_leaves_[index]);
  hook_keys_[index] = accumulators_[index]->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [this, index](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
        OnGradientReady(index);
        return outputs;
      }));
}

void DistributedDataParallel::ReceiveGradientThrough(const torch::Tensor& parameter, const torch::Tensor& leaf) {
  const auto found = std::find_if(parameters_.begin(), parameters_.end(),
                                  [&](const torch::Tensor& p) { return p.is_same(parameter); });
  if (found == parameters_.end()) {
    throw Error(ExitCode::kFailure, "DistributedDataParallel::ReceiveGradientThrough: not a parameter of the module");
  }
  const auto index = static_cast<size_t>(found - parameters_.begin());
  accumulators_[index]->del_post_hook(hook_keys_[index]);
  gradient_leaves_[index] = leaf;
  HookGradientOf(index);
}

void DistributedDataParallel::OnGradientReady(size_t index) {
  if (!sync_enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!rebuilt_) observed_order_.push_back(index);
  MarkReady(index);
  LaunchReadyBuckets();
}

// Requires mutex_. Queues the parameter's gradient for its bucket's copy (nothing to copy when it
// is a view of it already).
void DistributedDataParallel::MarkReady(size_t index) {
  if (ready_[index]) {
    throw Error(ExitCode::kFailure, fmt::format("parameter '{}' received its gradient twice in one backward pass; "
                                                "DDP reduces each parameter once per step", names_[index]));
  }
  ready_[index] = true;
  const Location where = locations_[index];
  Bucket& bucket = buckets_[where.bucket];
  torch::Tensor& view = bucket.views[where.slot];
  torch::Tensor& grad = gradient_leaves_[index].mutable_grad();
  torch::NoGradGuard no_grad;
  if (!grad.defined()) {
    view.zero_();  // an unused parameter (find_unused_parameters)
  } else if (!grad.is_alias_of(view)) {
    bucket.arrived.push_back(grad);  // keeps autograd's tensor alive until the copy is queued
    bucket.arrived_views.push_back(view);
    if (!gradient_leaves_[index].is_same(parameters_[index])) {
      grad = torch::Tensor();  // a copy's: the next backward starts afresh; FinishBackward sets the parameter's
    } else if (options_.gradient_as_bucket_view) {
      grad = view;  // filled by the copy, before anything reads it
    }
  }
  --bucket.pending;
}

// Requires mutex_. Launches, in bucket order, every bucket whose gradients are all in.
void DistributedDataParallel::LaunchReadyBuckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    Bucket& bucket = buckets_[next_to_launch_];
    if (!bucket.arrived.empty()) CopyArrivals(bucket);
    const std::string what = fmt::format("gradient bucket {} of {} ({} bytes)", next_to_launch_, buckets_.size(),
                                         bucket.contents.numel() * bucket.contents.element_size());
    if (options_.compression == DdpCompression::kNone) {
      bucket.work = communicator_.AllReduceMean(bucket.contents, what);
    } else {
      bucket.wire = bucket.contents.to(options_.compression == DdpCompression::kFp16 ? torch::kHalf : torch::kBFloat16);
      bucket.work = communicator_.AllReduceMean(bucket.wire, what);
    }
    ++next_to_launch_;
  }
}

// Requires mutex_. The bucket's arrived gradients into their views: one multi-tensor copy per
// source dtype (the multi-tensor kernel takes sources of one dtype; low-precision copies' bfloat16
// gradients sit beside float32 ones in a bucket).
void DistributedDataParallel::CopyArrivals(Bucket& bucket) {
  torch::NoGradGuard no_grad;
  std::vector<bool> copied(bucket.arrived.size(), false);
  for (size_t first = 0; first < bucket.arrived.size(); ++first) {
    if (copied[first]) continue;
    std::vector<torch::Tensor> views, sources;
    for (size_t i = first; i < bucket.arrived.size(); ++i) {
      if (copied[i] || bucket.arrived[i].scalar_type() != bucket.arrived[first].scalar_type()) continue;
      views.push_back(bucket.arrived_views[i]);
      sources.push_back(bucket.arrived[i]);
      copied[i] = true;
    }
    at::_foreach_copy_(views, sources);
  }
  bucket.arrived.clear();  // their memory goes back to the allocator, ordered on this stream
  bucket.arrived_views.clear();
}

void DistributedDataParallel::ResetIteration() {
  ready_.assign(parameters_.size(), false);
  for (auto& bucket : buckets_) {
    bucket.pending = static_cast<int>(bucket.members.size());
    bucket.arrived.clear();
    bucket.arrived_views.clear();
    bucket.work.reset();
  }
  next_to_launch_ = 0;
}

void DistributedDataParallel::PrepareForward() {
  if (!flat_buffers_) return;
  for (const torch::Tensor& group : flat_buffers_->groups()) communicator_.Broadcast(group, 0, "buffers")->Wait();
}

void DistributedDataParallel::FinishBackward(const std::function<void(const std::vector<size_t>&)>& on_bucket_reduced) {
  if (!sync_enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> missing;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (!ready_[i]) missing.push_back(names_[i]);
    }
    if (!missing.empty()) {
      if (!options_.find_unused_parameters) {
        throw Error(ExitCode::kFailure,
                    fmt::format("{} parameter(s) received no gradient this step ({}); DDP waits for every "
                                "parameter: pass --find-unused-parameters true if the model skips some",
                                missing.size(), fmt::join(missing, ", ")));
      }
      for (size_t i = 0; i < parameters_.size(); ++i) {
        if (!ready_[i]) MarkReady(i);
      }
      LaunchReadyBuckets();
    }
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> copy_back, averages;  // gradients that are not views of their buckets
  for (auto& bucket : buckets_) {  // in launch order
    bucket.work->Wait();
    TakeAverages(bucket, copy_back, averages);
    if (on_bucket_reduced) {
      CopyBack(copy_back, averages);
      on_bucket_reduced(bucket.members);
    }
  }
  CopyBack(copy_back, averages);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ResetIteration();
  }
  if (!rebuilt_) RebuildFromObservedOrder();
}

// The bucket's averages become its parameters' gradients: views of the bucket, or clones of it,
// or, for a gradient that is neither, queued in `copy_back` and `averages` for CopyBack.
void DistributedDataParallel::TakeAverages(Bucket& bucket, std::vector<torch::Tensor>& copy_back,
                                           std::vector<torch::Tensor>& averages) {
  if (bucket.wire.defined()) {
    bucket.contents.copy_(bucket.wire);
    bucket.wire = torch::Tensor();
  }
  for (size_t slot = 0; slot < bucket.members.size(); ++slot) {
    torch::Tensor& grad = parameters_[bucket.members[slot]].mutable_grad();
    if (!grad.defined()) {
      grad = options_.gradient_as_bucket_view ? bucket.views[slot] : bucket.views[slot].clone();
    } else if (!grad.is_alias_of(bucket.views[slot])) {
      copy_back.push_back(grad);
      averages.push_back(bucket.views[slot]);
    }
  }
}

// One multi-tensor copy of the queued averages into their gradients; empties both lists.
void DistributedDataParallel::CopyBack(std::vector<torch::Tensor>& copy_back, std::vector<torch::Tensor>& averages) {
  if (copy_back.empty()) return;
  at::_foreach_copy_(copy_back, averages);
  copy_back.clear();
  averages.clear();
}

// Rank 0's observed gradient order decides the new plan on every rank.
void DistributedDataParallel::RebuildFromObservedOrder() {
  std::vector<int64_t> order(parameters_.size());
  std::vector<bool> seen(parameters_.size(), false);
  size_t at = 0;
  for (size_t index : observed_order_) {
    if (!seen[index]) order[at++] = static_cast<int64_t>(index), seen[index] = true;
  }
  for (size_t i = parameters_.size(); i-- > 0;) {
    if (!seen[i]) order[at++] = static_cast<int64_t>(i);  // never-ready parameters go last
  }
  torch::Tensor shared = torch::tensor(order, torch::TensorOptions().dtype(torch::kLong).device(parameters_[0].device()));
  communicator_.Broadcast(shared, 0, "observed gradient order")->WaitForHost();
  shared = shared.cpu();
  std::vector<size_t> agreed;
  for (int64_t i = 0; i < shared.numel(); ++i) agreed.push_back(static_cast<size_t>(shared[i].item<int64_t>()));
  rebuilt_ = true;
  observed_order_.clear();
  BuildBuckets(agreed);
}

void DistributedDataParallel::ZeroGrad() {
  for (auto& p : parameters_) p.mutable_grad().reset();
}

void DistributedDataParallel::LaunchCaptured(const std::function<void()>& replay) {
  communicator_.LaunchWatched(replay, fmt::format("the replayed CUDA graph of a DDP step ({} bucket all-reduces)",
                                                  buckets_.size()));
}

std::vector<int64_t> DistributedDataParallel::BucketBytes() const {
  std::vector<int64_t> bytes;
  for (const auto& bucket : buckets_) bytes.push_back(bucket.contents.numel() * bucket.contents.element_size());
  return bytes;
}

std::vector<std::vector<size_t>> DistributedDataParallel::BucketMembers() const {
  std::vector<std::vector<size_t>> members;
  for (const auto& bucket : buckets_) members.push_back(bucket.members);
  return members;
}

}  // namespace mgpu
