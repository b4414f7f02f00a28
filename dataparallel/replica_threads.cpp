#include "dataparallel/replica_threads.h"

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mgpu {

ReplicaThreads::ReplicaThreads(std::vector<torch::Device> devices)
    : devices_(std::move(devices)), errors_(devices_.size()) {
  for (const auto& device : devices_) {
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
    pending_ = threads_.size();
    ++generation_;
    for (auto& error : errors_) error = nullptr;
  }
  start_.notify_all();
  try {
    job(0);
  } catch (...) {
    errors_[0] = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
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
  while (true) {
    const std::function<void(size_t)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    std::exception_ptr error;
    try {
      (*job)(replica);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      errors_[replica] = error;
      --pending_;
    }
    done_.notify_one();
  }
}

}  // namespace mgpu
