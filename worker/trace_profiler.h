// --profile-steps FIRST-LAST: a Chrome trace of those optimizer steps, from LibTorch's own
// profiler (Kineto): every ATen operator on the host threads and, on a GPU, every kernel, copy
// and NCCL collective with its stream, the CUDA runtime calls that block the host
// (cudaStreamSynchronize, cudaEventSynchronize, ...), and a range per step ("mgpu step 12").
// It answers questions such as "why does the device sit idle between steps": open the file in
// https://ui.perfetto.dev or chrome://tracing, or list its idle gaps with bench/trace_gaps.py.
// Each rank writes <out>/trace-rank<R>.json.
//
// Profiling slows the steps it covers (the host records every operator), so the steps of the
// window are not representative of throughput; metrics rows still include them.
#pragma once

#include <memory>
#include <string>

#include <torch/torch.h>

#include "config/profile_window.h"

namespace mgpu {

class TraceProfiler {
 public:
  // Profiles nothing until BeforeStep(window.first); `path` is the trace file.
  TraceProfiler(ProfileWindow window, std::string path, const torch::Device& device);
  // Stops a profile still running (a run that ended or failed inside the window) without writing.
  ~TraceProfiler();
  TraceProfiler(const TraceProfiler&) = delete;
  TraceProfiler& operator=(const TraceProfiler&) = delete;

  // Call before the work of optimizer step `step` (1-based) begins: starts the profile at the
  // window's first step, and opens the step's range in the trace.
  void BeforeStep(int64_t step);
  // Call when step `step`'s work has been issued: closes its range; after the window's last step
  // waits for the device, stops the profile and writes the trace (atomically). Returns the
  // trace's path when it was written by this call, else "".
  std::string AfterStep(int64_t step);
  // Writes what was profiled so far if the run ends before the window's last step (--max-steps,
  // end of training); returns the path, or "" when there was nothing to write.
  std::string Finish();

 private:
  class Session;
  ProfileWindow window_;
  std::string path_;
  torch::Device device_;
  std::unique_ptr<Session> session_;  // non-null while profiling
};

}  // namespace mgpu
