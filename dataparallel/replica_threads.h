// ReplicaThreads: one persistent thread per extra replica, kept for the whole run.
//
// Thread r (r >= 1) is created once, binds itself to devices[r] (CUDA: the device and the
// stream that was current for it on the constructing thread, for its whole life) and then
// waits for jobs. Run(job) hands every thread the same job, runs job(0) on the calling thread
// (which drives the primary, devices[0]), and returns when all are done; the first exception
// any of them threw is rethrown there, after all have finished. No thread is created per step,
// unlike std::async or LibTorch's parallel_apply.
//
// With CUDA devices both sides spin for up to kSpin before they block on a condition variable:
// a sleeping thread takes 50-250 us to wake on a GPU host, as long as the rest of a launch-bound
// small model's step, and a step is short enough that the next job comes within the spin.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <torch/torch.h>

namespace mgpu {

class ReplicaThreads {
 public:
  explicit ReplicaThreads(std::vector<torch::Device> devices);
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  // Runs job(r) for every replica r at once; not reentrant.
  void Run(const std::function<void(size_t replica)>& job);

 private:
  void Loop(size_t replica);

  static constexpr std::chrono::microseconds kSpin{2000};

  std::vector<torch::Device> devices_;
  std::vector<c10::Stream> streams_;  // per replica: the stream its thread makes current
  bool spin_ = false;                 // any CUDA device
  std::mutex mutex_;  // with the condition variables, for the threads that stopped spinning
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(size_t)>* job_ = nullptr;  // published by the generation's increment
  std::atomic<uint64_t> generation_{0};  // bumped by every Run, so a thread runs each job once
  std::atomic<size_t> pending_{0};       // threads still running the current job
  std::atomic<bool> stopping_{false};
  std::vector<std::exception_ptr> errors_;  // per replica, for the current job
  std::vector<std::thread> threads_;
};

}  // namespace mgpu
