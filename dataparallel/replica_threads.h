// ReplicaThreads: one persistent thread per extra replica, kept for the whole run.
//
// Thread r (r >= 1) is created once, binds itself to devices[r] (CUDA: the device and the
// stream that was current for it on the constructing thread, for its whole life) and then
// waits on a condition variable. Run(job) hands every thread the same job, runs job(0) on the
// calling thread (which drives the primary, devices[0]), and returns when all are done; the
// first exception any of them threw is rethrown there, after all have finished. No thread is
// created per step, unlike std::async or LibTorch's parallel_apply.
#pragma once

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

  std::vector<torch::Device> devices_;
  std::vector<c10::Stream> streams_;  // per replica: the stream its thread makes current
  std::mutex mutex_;
  std::condition_variable start_;
  std::condition_variable done_;
  const std::function<void(size_t)>* job_ = nullptr;
  uint64_t generation_ = 0;  // bumped by every Run, so a thread runs each job once
  size_t pending_ = 0;       // threads still running the current job
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;  // per replica, for the current job
  std::vector<std::thread> threads_;
};

}  // namespace mgpu
