#include "ddp/nccl_communicator.h"
#include "ddp/nccl_types.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

#include "ddp/stuck_watchdog_guard.h"

namespace mgpu {
namespace {

std::string HostName() {
  char host[256] = "unknown-host";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

// nccl-tests style checks: host, file:line, the call, NCCL's text and its last error.
#define MGPU_NCCL_CHECK(call, comm)                                                                      \
  do {                                                                                                   \
    const ncclResult_t result_ = (call);                                                                 \
    if (result_ != ncclSuccess) {                                                                        \
      throw CollectiveError(fmt::format("{}: {}:{}: {} failed: {} (last NCCL error: {})", HostName(),    \
                                        __FILE__, __LINE__, #call, ncclGetErrorString(result_),          \
                                        ncclGetLastError(comm)));                                        \
    }                                                                                                    \
  } while (0)

#define MGPU_CUDA_CHECK(call)                                                                            \
  do {                                                                                                   \
    const cudaError_t error_ = (call);                                                                   \
    if (error_ != cudaSuccess) {                                                                         \
      throw CollectiveError(fmt::format("{}: {}:{}: {} failed: {}", HostName(), __FILE__, __LINE__,      \
                                        #call, cudaGetErrorString(error_)));                             \
    }                                                                                                    \
  } while (0)

// A CUDA event shared by a work handle and the watchdog; destroyed when both are done with it.
using SharedEvent = std::shared_ptr<CUevent_st>;

SharedEvent NewEvent(unsigned flags = cudaEventDisableTiming) {
  cudaEvent_t event = nullptr;
  MGPU_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags));
  return SharedEvent(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
}

class NcclCommunicator;

class NcclWork : public CollectiveWork {
 public:
  NcclWork(NcclCommunicator* owner, SharedEvent done) : owner_(owner), done_(std::move(done)) {}
  void Wait() override;
  void WaitForHost() override;

 private:
  NcclCommunicator* owner_;
  SharedEvent done_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const std::string& unique_id, int rank, int size, int device, std::chrono::milliseconds timeout,
                   const NcclOptions& options)
      : rank_(rank), size_(size), device_(device), timeout_(timeout) {
    ncclUniqueId id;
    if (unique_id.size() != sizeof(id.internal)) {
      throw CollectiveError(fmt::format("NCCL unique id has {} bytes, expected {}", unique_id.size(), sizeof(id.internal)));
    }
    std::copy(unique_id.begin(), unique_id.end(), id.internal);
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (options.max_ctas > 0) config.maxCTAs = options.max_ctas;
    MGPU_NCCL_CHECK(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), nullptr);
    int least_priority = 0, greatest_priority = 0;
    MGPU_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
    MGPU_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking,
                                                 options.high_priority_stream ? greatest_priority : least_priority));
    watchdog_ = std::thread([this] { WatchdogLoop(); });
  }

  // ncclCommDestroy first finishes the collectives still in flight (ncclCommFinalize), which
  // never happens when a peer never joins them (this rank failed in the middle of a step, or the
  // peer did): they get a short grace, then the communicator is aborted instead, which lets
  // their kernels exit. An abandoned communicator (this rank failed) is aborted at once:
  // ncclCommDestroy synchronizes with the peers, which may wait in a collective of their own.
  ~NcclCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    watchdog_.join();
    guard_.EnterTeardown();  // its reports now name the teardown below
    if (!aborted_ && abandoned_) {
      std::fprintf(stderr, "mgpu-worker: %s: this rank failed; aborting the communicator rather than waiting for the "
                   "other ranks\n", CollectiveContext("communicator", rank_).c_str());
      ncclCommAbort(comm_);
    } else if (!aborted_) {
      if (InFlightFinishWithin(std::min<std::chrono::milliseconds>(timeout_, kTeardownGrace))) {
        ncclCommDestroy(comm_);
      } else {
        std::fprintf(stderr, "mgpu-worker: %s: collectives still in flight at shutdown; aborting the communicator\n",
                     CollectiveContext("communicator", rank_).c_str());
        ncclCommAbort(comm_);
      }
    }
    cudaStreamDestroy(stream_);
  }

  void Abandon() override { abandoned_ = true; }

  std::string backend() const override { return "nccl"; }
  std::optional<double> CompletedCollectiveSeconds() override {
    std::lock_guard<std::mutex> lock(mutex_);
    ReapCompleted();
    return completed_seconds_;
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::unique_ptr<CollectiveWork> AllReduceSum(torch::Tensor tensor, const std::string& what) override {
    return AllReduce(tensor, ncclSum, "all-reduce of " + what);
  }

  // ncclAvg on floating types multiplies each rank's share by 1/size before summing
  // (ncclDevPreMulSum): no separate division kernel on either side of the collective.
  std::unique_ptr<CollectiveWork> AllReduceMean(torch::Tensor tensor, const std::string& what) override {
    return AllReduce(tensor, ncclAvg, "all-reduce (mean) of " + what);
  }

  std::unique_ptr<CollectiveWork> Broadcast(torch::Tensor tensor, int root, const std::string& what) override {
    const std::string label = "broadcast of " + what, context = CollectiveContext(label, rank_);
    return Launch(tensor, label, context, [&] {
      MGPU_NCCL_CHECK(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes(), ncclUint8, root, comm_, stream_),
                      comm_);
    });
  }

  std::unique_ptr<CollectiveWork> AllGather(torch::Tensor output, torch::Tensor input, const std::string& what) override {
    const std::string label = "all-gather of " + what, context = CollectiveContext(label, rank_);
    RecordOnCommStream(input);
    return Launch(output, label, context, [&] {
      MGPU_NCCL_CHECK(ncclAllGather(input.data_ptr(), output.data_ptr(), input.nbytes(), ncclUint8, comm_, stream_), comm_);
    });
  }

  void Barrier(const std::string& what) override {
    auto token = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA, device_));
    AllReduceSum(token, "barrier " + what)->WaitForHost();
  }

  void LaunchWatched(const std::function<void()>& launch, const std::string& what) override {
    ThrowIfFailed();
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    while (replays_in_flight_.size() >= kMaxReplaysInFlight) {
      AwaitPolling(replays_in_flight_.front());
      replays_in_flight_.pop_front();
    }
    launch();
    const SharedEvent done = NewEvent();
    MGPU_CUDA_CHECK(cudaEventRecord(done.get(), at::cuda::getCurrentCUDAStream(device_).stream()));
    replays_in_flight_.push_back(done);
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(Pending{nullptr, done, CollectiveContext(what, rank_), std::chrono::steady_clock::now() + timeout_,
                               tracker_.Begin(what)});
  }

  // Makes the caller's current stream wait for `done`; throws if the watchdog saw a failure.
  void WaitOn(const SharedEvent& done) {
    ThrowIfFailed();
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    MGPU_CUDA_CHECK(cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream(device_).stream(), done.get(), 0));
  }

  // Returns once `done` has completed, polling: the watchdog's failure (a timeout included) throws.
  void AwaitPolling(const SharedEvent& done) {
    while (true) {
      ThrowIfFailed();
      const cudaError_t state = cudaEventQuery(done.get());
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) MGPU_CUDA_CHECK(state);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

 private:
  struct Pending {
    SharedEvent started;  // timing events around the collective on stream_; no `started`: not a
    SharedEvent done;     // collective's own time (a graph replay), watched but not added up
    std::string context;
    std::chrono::steady_clock::time_point deadline;
    CollectiveTracker::Token outstanding;  // until the watchdog sees `done`
  };

  std::unique_ptr<CollectiveWork> AllReduce(const torch::Tensor& tensor, ncclRedOp_t op, const std::string& label) {
    const std::string context = CollectiveContext(label, rank_);
    return Launch(tensor, label, context, [&] {
      MGPU_NCCL_CHECK(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                                    NcclDataType(tensor.scalar_type(), context), op, comm_, stream_),
                      comm_);
    });
  }

  template <typename Call>
  // `label` names the collective ("all-reduce of bucket 2"), `context` adds the rank and host.
  std::unique_ptr<CollectiveWork> Launch(const torch::Tensor& tensor, const std::string& label,
                                         const std::string& context, Call call) {
    ThrowIfFailed();
    if (!tensor.is_cuda() || tensor.get_device() != device_ || !tensor.is_contiguous()) {
      throw CollectiveError(fmt::format("{}: the nccl backend takes contiguous tensors on cuda:{}", context, device_));
    }
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    const cudaStream_t current = at::cuda::getCurrentCUDAStream(device_).stream();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MGPU_CUDA_CHECK(cudaStreamIsCapturing(current, &capture));
    const bool capturing = capture != cudaStreamCaptureStatusNone;
    // Under capture the events only order the graph's branches: waiting on `ready` makes stream_
    // part of the capture, and the handle's Wait() on `done` joins it back.
    const SharedEvent ready = NewEvent(), done = NewEvent(capturing ? cudaEventDisableTiming : cudaEventDefault);
    const SharedEvent started = capturing ? nullptr : NewEvent(cudaEventDefault);
    MGPU_CUDA_CHECK(cudaEventRecord(ready.get(), current));
    MGPU_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready.get(), 0));
    RecordOnCommStream(tensor);
    if (started) MGPU_CUDA_CHECK(cudaEventRecord(started.get(), stream_));
    call();
    MGPU_CUDA_CHECK(cudaEventRecord(done.get(), stream_));
    // A captured collective runs at each replay, which LaunchWatched holds to the timeout; its
    // events belong to the graph and cannot be queried.
    if (capturing) return std::make_unique<NcclWork>(this, done);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.push_back(Pending{started, done, context, std::chrono::steady_clock::now() + timeout_,
                                 tracker_.Begin(label)});
    }
    return std::make_unique<NcclWork>(this, done);
  }

  // The caching allocator must not hand this memory out again before the collective is done.
  void RecordOnCommStream(const torch::Tensor& tensor) {
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(),
                                                  c10::cuda::getStreamFromExternal(stream_, static_cast<c10::DeviceIndex>(device_)));
  }

  void ThrowIfFailed() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty()) throw CollectiveError(failure_, failure_fault_);
  }

  // Whether every watched collective completes within `grace` (polled).
  bool InFlightFinishWithin(std::chrono::milliseconds grace) {
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (true) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ReapCompleted();
        if (pending_.empty()) return true;
      }
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Requires mutex_. Forgets the collectives that are done, adding up their device time.
  void ReapCompleted() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (cudaEventQuery(it->done.get()) != cudaSuccess) {
        ++it;
        continue;
      }
      float ms = 0;
      if (it->started && cudaEventElapsedTime(&ms, it->started.get(), it->done.get()) == cudaSuccess) {
        completed_seconds_ += ms / 1000.0;
      }
      it = pending_.erase(it);
    }
  }

  void WatchdogLoop() {
    pthread_setname_np(pthread_self(), "mgpu-watchdog");  // names it in top -H and /proc/PID/task
    cudaSetDevice(device_);
    // The training thread may be capturing a CUDA graph in CUDA's global mode, which would
    // otherwise forbid this thread's event queries (and invalidate the capture).
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&relaxed);
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::unique_lock<std::mutex> lock(mutex_);
      if (stopping_) return;
      guard_.Beat(pending_.empty() ? std::nullopt
                                   : std::make_optional(StuckWatchdogGuard::Outstanding{
                                         pending_.front().context, pending_.front().deadline, timeout_}));
      ReapCompleted();
      ncclResult_t async_error = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async_error);
      std::string failure;
      CollectiveFault fault = CollectiveFault::kPeer;  // a remote error, or peers that never joined
      if (async_error != ncclSuccess && async_error != ncclInProgress) {
        if (async_error != ncclRemoteError) fault = CollectiveFault::kThisRank;
        failure = fmt::format("{}: NCCL reported an asynchronous error: {} (last NCCL error: {})",
                              pending_.empty() ? CollectiveContext("communicator", rank_) : pending_.front().context,
                              ncclGetErrorString(async_error), ncclGetLastError(comm_));
      } else if (!pending_.empty() && std::chrono::steady_clock::now() > pending_.front().deadline) {
        failure = fmt::format("{} did not complete within {} s (nccl): a rank has stopped or is stuck; "
                              "aborting the communicator",
                              pending_.front().context, timeout_.count() / 1000);
      }
      if (failure.empty()) continue;
      failure_ = failure;
      failure_fault_ = fault;
      lock.unlock();
      std::fprintf(stderr, "mgpu-worker: %s\n", failure.c_str());
      std::fflush(stderr);
      ncclCommAbort(comm_);
      aborted_ = true;
      // Kernels waiting on the aborted communicator return; if the training thread still does
      // not reach a point where it reports the failure, end the process so it cannot hang.
      std::this_thread::sleep_for(std::chrono::seconds(10));
      std::fprintf(stderr, "mgpu-worker: exiting after the NCCL failure above\n");
      std::_Exit(1);
    }
  }

  static constexpr std::chrono::milliseconds kTeardownGrace{5000};
  // Graph replays launched and not yet seen complete, at most: the device always has the next
  // step queued, and the host cannot fill the device's queue while a peer has stopped.
  static constexpr size_t kMaxReplaysInFlight = 3;

  int rank_;
  int size_;
  int device_;
  std::chrono::milliseconds timeout_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::mutex mutex_;
  std::list<Pending> pending_;
  std::deque<SharedEvent> replays_in_flight_;  // LaunchWatched's, oldest first; the training thread's only
  std::string failure_;
  CollectiveFault failure_fault_ = CollectiveFault::kThisRank;
  bool stopping_ = false;
  std::atomic<bool> aborted_{false};
  bool abandoned_ = false;  // Abandon() was called: abort, never destroy
  double completed_seconds_ = 0;  // device time of the collectives reaped so far; guarded by mutex_
  StuckWatchdogGuard guard_;  // ends the process if the watchdog itself blocks (stuck_watchdog_guard.h)
  std::thread watchdog_;
};

void NcclWork::Wait() { owner_->WaitOn(done_); }
void NcclWork::WaitForHost() {
  owner_->WaitOn(done_);
  owner_->AwaitPolling(done_);
}

}  // namespace

ncclDataType_t NcclDataType(torch::ScalarType type, const std::string& context) {
  switch (type) {
    case torch::kFloat: return ncclFloat32;
    case torch::kHalf: return ncclFloat16;
    case torch::kBFloat16: return ncclBfloat16;
    case torch::kDouble: return ncclFloat64;
    case torch::kLong: return ncclInt64;
    case torch::kInt: return ncclInt32;
    case torch::kByte: return ncclUint8;
    default: throw CollectiveError(context + ": NCCL cannot reduce tensors of type " + std::string(c10::toString(type)));
  }
}

std::string NewNcclUniqueId() {
  ncclUniqueId id;
  MGPU_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
  return std::string(id.internal, sizeof(id.internal));
}

std::unique_ptr<Communicator> MakeNcclCommunicator(const std::string& unique_id, int rank, int size, int device_index,
                                                   std::chrono::milliseconds timeout, const NcclOptions& options) {
  return std::make_unique<NcclCommunicator>(unique_id, rank, size, device_index, timeout, options);
}

}  // namespace mgpu
