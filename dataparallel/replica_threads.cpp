#include "dataparallel/replica_threads.h"

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mgpu {
namespace {

// Polls `ready` for up to `limit`; whether it became true.
template <typename Ready>
bool SpinUntil(Ready ready, std::chrono::microseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

ReplicaThreads::ReplicaThreads(std::vector<torch::Device> devices)
    : devices_(std::move(devices)), errors_(devices_.size()) {
  for (const auto& device : devices_) {
    spin_ = spin_ || device.is_cuda();
#ifdef MGPU_WITH_CUDA
    if (device.is_cuda()) {
      streams_.push_back(c10::cuda::getCurrentCUDAStream(device.index()).unwrap());
      continue;
    }
#endif
    streams_.emplace_back(c10::Stream::DEFAULT, device);
  }
  for (size_t r = 1; r < devices_.size(); ++r) threads_.emplace_back([this, r] { Loop(r); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (auto& thread : threads_) thread.join();
}

void ReplicaThreads::Run(const std::function<void(size_t replica)>& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    for (auto& error : errors_) error = nullptr;
    pending_.store(threads_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  try {
    job(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  const auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!(spin_ && SpinUntil(all_done, kSpin))) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, all_done);
  }
  job_ = nullptr;
  for (const auto& error : errors_) {
    if (error) std::rethrow_exception(error);
  }
}

void ReplicaThreads::Loop(size_t replica) {
  // Kernels this thread queues go to its device and stream; autograd's device threads follow
  // the streams recorded in forward.
#ifdef MGPU_WITH_CUDA
  std::optional<c10::cuda::CUDAStreamGuard> stream_guard;
  if (devices_[replica].is_cuda()) stream_guard.emplace(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, streams_[replica]));
#endif
  uint64_t seen = 0;
  const auto has_work = [&] {
    return stopping_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
  };
  while (true) {
    if (!(spin_ && SpinUntil(has_work, kSpin))) {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, has_work);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    const std::function<void(size_t)>* job = job_;
    std::exception_ptr error;
    try {
      (*job)(replica);
    } catch (...) {
      error = std::current_exception();
    }
    errors_[replica] = error;
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // a Run that stopped spinning sleeps, or sees 0
      done_.notify_one();
    }
  }
}

}  // namespace mgpu
