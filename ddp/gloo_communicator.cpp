// The only file that includes ProcessGroupGloo.hpp. LibTorch's wheel ships no gloo headers; this
// file compiles against Debian's libgloo-dev headers (never linked: the code is libtorch's).
// That is sound because everything used here crosses into libtorch through pointer-sized
// members and out-of-line functions: the Options and ProcessGroupGloo layouts hold only
// shared/intrusive pointers, vectors and std types, and the vtables are emitted by libtorch.
#include "ddp/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <fmt/format.h>

namespace mgpu {
namespace {

class GlooWork : public CollectiveWork {
 public:
  GlooWork(c10::intrusive_ptr<c10d::Work> work, std::string context, std::chrono::milliseconds timeout,
           CollectiveTracker::Token pending)
      : work_(std::move(work)), context_(std::move(context)), timeout_(timeout), pending_(std::move(pending)) {}

  // A collective that started and then failed lost a peer: gloo fails one under way only when a
  // pair's connection breaks ("Connection reset by peer", "Connection closed by peer") or the
  // peers do not take part within the timeout.
  void Wait() override {
    try {
      work_->wait(timeout_);
      pending_.Done();
    } catch (const c10::Error& e) {
      throw CollectiveError(fmt::format("{} failed (gloo, timeout {} s): {}", context_, timeout_.count() / 1000,
                                        e.what_without_backtrace()),
                            CollectiveFault::kPeer);
    } catch (const std::exception& e) {
      throw CollectiveError(fmt::format("{} failed (gloo, timeout {} s): {}", context_, timeout_.count() / 1000,
                                        e.what()),
                            CollectiveFault::kPeer);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::string context_;
  std::chrono::milliseconds timeout_;
  CollectiveTracker::Token pending_;
};

class GlooCommunicator : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::Backend> backend, int rank, int size, std::chrono::milliseconds timeout)
      : backend_(std::move(backend)), rank_(rank), size_(size), timeout_(timeout) {}

  std::string backend() const override { return "gloo"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::unique_ptr<CollectiveWork> AllReduceSum(torch::Tensor tensor, const std::string& what) override {
    std::vector<torch::Tensor> tensors = {tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return Wrap([&] { return backend_->allreduce(tensors, options); }, "all-reduce of " + what);
  }

  std::unique_ptr<CollectiveWork> Broadcast(torch::Tensor tensor, int root, const std::string& what) override {
    std::vector<torch::Tensor> tensors = {tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return Wrap([&] { return backend_->broadcast(tensors, options); }, "broadcast of " + what);
  }

  std::unique_ptr<CollectiveWork> AllGather(torch::Tensor output, torch::Tensor input, const std::string& what) override {
    std::vector<std::vector<torch::Tensor>> outputs(1);
    for (auto& slice : output.view({size_, -1}).unbind(0)) outputs[0].push_back(slice.view(input.sizes()));
    std::vector<torch::Tensor> inputs = {input};
    return Wrap([&] { return backend_->allgather(outputs, inputs); }, "all-gather of " + what);
  }

  void Barrier(const std::string& what) override {
    Wrap([&] { return backend_->barrier(); }, "barrier " + what)->Wait();
  }

 private:
  template <typename Launch>
  std::unique_ptr<CollectiveWork> Wrap(Launch launch, const std::string& what) {
    const std::string context = CollectiveContext(what, rank_);
    try {
      CollectiveTracker::Token pending = tracker_.Begin(what);
      return std::make_unique<GlooWork>(launch(), context, timeout_, std::move(pending));
    } catch (const c10::Error& e) {
      throw CollectiveError(fmt::format("{} could not start (gloo): {}", context, e.what_without_backtrace()));
    }
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::unique_ptr<Communicator> MakeGlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                   const GlooInterface& interface,
                                                   std::chrono::milliseconds timeout) {
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    for (const std::string& name : interface.interface_names) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
    }
    if (interface.interface_names.empty()) {
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(interface.bind_address));
    }
    c10::intrusive_ptr<c10d::Backend> backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
    return std::make_unique<GlooCommunicator>(std::move(backend), rank, size, timeout);
  } catch (const c10::Error& e) {
    throw CollectiveError(fmt::format("{} could not connect the gloo group of {} ranks: {}",
                                      CollectiveContext("set-up", rank), size, e.what_without_backtrace()));
  }
}

}  // namespace mgpu
