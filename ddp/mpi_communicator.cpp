#include "ddp/mpi_communicator.h"

#include <mpi.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace mgpu {
namespace {

// MPI calls are serialized through this lock: the process may get only MPI_THREAD_SERIALIZED,
// and autograd hooks may launch collectives from another thread than the one that waits.
std::mutex& MpiMutex() {
  static std::mutex mutex;
  return mutex;
}

void CheckMpi(int code, const std::string& context) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw CollectiveError(fmt::format("{} failed (mpi): {}", context, std::string(text, static_cast<size_t>(length))));
}

MPI_Datatype MpiType(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return MPI_FLOAT;
    case torch::kDouble: return MPI_DOUBLE;
    case torch::kLong: return MPI_INT64_T;
    case torch::kInt: return MPI_INT32_T;
    case torch::kByte: return MPI_UINT8_T;
    default: return MPI_DATATYPE_NULL;
  }
}

class MpiWork : public CollectiveWork {
 public:
  // `finish` runs once the request completes (e.g. copying a float staging buffer back).
  MpiWork(MPI_Request request, std::string context, std::chrono::milliseconds timeout,
          CollectiveTracker::Token pending, std::function<void()> finish = {})
      : request_(request), context_(std::move(context)), timeout_(timeout), pending_(std::move(pending)),
        finish_(std::move(finish)) {}

  void Wait() override {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    auto pause = std::chrono::microseconds(20);
    while (true) {
      int done = 0;
      {
        std::lock_guard<std::mutex> lock(MpiMutex());
        CheckMpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), context_);
      }
      if (done) break;
      if (std::chrono::steady_clock::now() > deadline) {
        throw CollectiveError(fmt::format("{} did not complete within {} s (mpi); a rank has stopped or is "
                                          "stuck: check the other ranks' logs",
                                          context_, timeout_.count() / 1000),
                              CollectiveFault::kPeer);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    pending_.Done();
    if (finish_) finish_();
  }

 private:
  MPI_Request request_;
  std::string context_;
  std::chrono::milliseconds timeout_;
  CollectiveTracker::Token pending_;
  std::function<void()> finish_;
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(int rank, int size, std::chrono::milliseconds timeout) : rank_(rank), size_(size), timeout_(timeout) {}

  std::string backend() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::unique_ptr<CollectiveWork> AllReduceSum(torch::Tensor tensor, const std::string& what) override {
    const std::string context = CollectiveContext("all-reduce of " + what, rank_);
    Check(tensor, context);
    // MPI has no half-precision sum: reduce a float32 copy and write it back.
    torch::Tensor staging = MpiType(tensor.scalar_type()) == MPI_DATATYPE_NULL ? tensor.to(torch::kFloat) : tensor;
    MPI_Request request;
    {
      std::lock_guard<std::mutex> lock(MpiMutex());
      CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, staging.data_ptr(), static_cast<int>(staging.numel()),
                              MpiType(staging.scalar_type()), MPI_SUM, MPI_COMM_WORLD, &request),
               context);
    }
    std::function<void()> finish;
    if (!staging.is_same(tensor)) finish = [tensor, staging]() mutable { tensor.copy_(staging); };
    return std::make_unique<MpiWork>(request, context, timeout_, tracker_.Begin("all-reduce of " + what),
                                     std::move(finish));
  }

  std::unique_ptr<CollectiveWork> Broadcast(torch::Tensor tensor, int root, const std::string& what) override {
    const std::string context = CollectiveContext("broadcast of " + what, rank_);
    Check(tensor, context);
    MPI_Request request;
    std::lock_guard<std::mutex> lock(MpiMutex());
    CheckMpi(MPI_Ibcast(tensor.data_ptr(), static_cast<int>(tensor.nbytes()), MPI_BYTE, root, MPI_COMM_WORLD, &request),
             context);
    return std::make_unique<MpiWork>(request, context, timeout_, tracker_.Begin("broadcast of " + what));
  }

  std::unique_ptr<CollectiveWork> AllGather(torch::Tensor output, torch::Tensor input, const std::string& what) override {
    const std::string context = CollectiveContext("all-gather of " + what, rank_);
    Check(input, context);
    Check(output, context);
    MPI_Request request;
    std::lock_guard<std::mutex> lock(MpiMutex());
    CheckMpi(MPI_Iallgather(input.data_ptr(), static_cast<int>(input.nbytes()), MPI_BYTE, output.data_ptr(),
                            static_cast<int>(input.nbytes()), MPI_BYTE, MPI_COMM_WORLD, &request),
             context);
    return std::make_unique<MpiWork>(request, context, timeout_, tracker_.Begin("all-gather of " + what));
  }

  void Barrier(const std::string& what) override {
    const std::string context = CollectiveContext("barrier " + what, rank_);
    MPI_Request request;
    {
      std::lock_guard<std::mutex> lock(MpiMutex());
      CheckMpi(MPI_Ibarrier(MPI_COMM_WORLD, &request), context);
    }
    MpiWork(request, context, timeout_, tracker_.Begin("barrier " + what)).Wait();
  }

 private:
  static void Check(const torch::Tensor& tensor, const std::string& context) {
    if (!tensor.device().is_cpu() || !tensor.is_contiguous()) {
      throw CollectiveError(context + ": the mpi backend takes contiguous CPU tensors; use --backend nccl on GPUs");
    }
  }

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

MpiWorld InitializeMpi() {
  static const MpiWorld world = [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      CheckMpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      if (provided < MPI_THREAD_SERIALIZED) {
        throw CollectiveError("this MPI library gives too little thread support (MPI_THREAD_SERIALIZED is needed)");
      }
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
      });
    }
    MpiWorld w;
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    return w;
  }();
  return world;
}

void MpiBroadcastBytes(std::string& bytes) {
  std::lock_guard<std::mutex> lock(MpiMutex());
  int length = static_cast<int>(bytes.size());
  CheckMpi(MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD), "bootstrap broadcast");
  bytes.resize(static_cast<size_t>(length));
  CheckMpi(MPI_Bcast(bytes.data(), length, MPI_BYTE, 0, MPI_COMM_WORLD), "bootstrap broadcast");
}

std::unique_ptr<Communicator> MakeMpiCommunicator(std::chrono::milliseconds timeout) {
  const MpiWorld world = InitializeMpi();
  return std::make_unique<MpiCommunicator>(world.rank, world.size, timeout);
}

}  // namespace mgpu
