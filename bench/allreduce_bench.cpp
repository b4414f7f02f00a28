// mgpu-allreduce-bench: all-reduce bus bandwidth through mgpu's own communicator, nccl-tests
// style (`all_reduce_perf -b 8 -e 256M -f 2`): for each size, `--iters` back-to-back in-place
// float32 sums after `--warmup`, timed around the whole batch.
//
//   torchrun --no-python --nproc-per-node 2 mgpu-allreduce-bench [--backend nccl] [--max-bytes N]
//   (or mpirun -np 2 ..., or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by hand)
//
// Rank 0 prints one JSON line per size: bytes, time per all-reduce (us) as the caller sees it,
// algbw = bytes / time and busbw = algbw * 2 (n - 1) / n (the nccl-tests definitions, GB/s), and
// on nccl the device time NCCL's kernels took (the communicator's events around each
// ncclAllReduce) with the bus bandwidth it implies: the raw NCCL figure, without mgpu's
// ordering and bookkeeping. Each result is checked: every element must equal the sum of the
// ranks' fills, or the program exits 1 naming the size.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/status.h"
#include "ddp/rendezvous.h"
#include "ddp/world.h"

#ifdef MGPU_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace mgpu {
namespace {

struct Options {
  std::string backend = "auto";
  int64_t min_bytes = 8;
  int64_t max_bytes = 0;  // 0: 256 MiB on GPUs, 16 MiB on CPUs
  int iters = 20;
  int warmup = 5;
  double timeout_seconds = 300;
};

void Synchronize(const torch::Device& device) {
#ifdef MGPU_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
}

int Run(const Options& options) {
  const WorldInfo world = ResolveWorld(WorldFlags{}, ProcessEnvironment());
  const bool cuda = torch::cuda::is_available() && options.backend != "gloo" && options.backend != "mpi";
  const torch::Device device = cuda ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(world.local_rank))
                                    : torch::Device(torch::kCPU);
  const std::string backend = options.backend == "auto" ? DefaultBackend(device) : options.backend;
  RendezvousResult joined =
      Rendezvous(world, backend, device,
                 std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000)), NcclOptions{});
  Communicator& communicator = *joined.communicator;
  const int n = communicator.size();
  const int64_t max_bytes = options.max_bytes > 0 ? options.max_bytes : (cuda ? 256LL << 20 : 16LL << 20);
  if (world.rank == 0) {
    std::cout << nlohmann::json{{"backend", backend}, {"ranks", n}, {"device", device.str()},
                                {"rendezvous", joined.description}}.dump()
              << std::endl;
  }
  // Rank r fills with r + 1, so every element of the sum is n (n + 1) / 2 exactly in float32.
  const float expected = static_cast<float>(n * (n + 1) / 2);
  for (int64_t bytes = options.min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int64_t count = std::max<int64_t>(bytes / 4, 1);
    torch::Tensor buffer = torch::empty({count}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    auto all_reduce = [&] { communicator.AllReduceSum(buffer, fmt::format("{} bytes", bytes))->Wait(); };
    for (int i = 0; i < options.warmup; ++i) all_reduce();
    buffer.fill_(static_cast<float>(world.rank + 1));
    all_reduce();
    if (!buffer.eq(expected).all().item<bool>()) {
      throw Error(ExitCode::kFailure, fmt::format("all-reduce of {} bytes on rank {}: the sum is not {} everywhere",
                                                  bytes, world.rank, expected));
    }
    communicator.Barrier("timing start");
    Synchronize(device);
    const double device_before = communicator.CompletedCollectiveSeconds().value_or(0);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.iters; ++i) all_reduce();
    Synchronize(device);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / options.iters;
    const double bus_factor = 2.0 * (n - 1) / n;
    const double algbw = static_cast<double>(count * 4) / seconds / 1e9;
    nlohmann::json row = {{"bytes", count * 4}, {"time_us", seconds * 1e6}, {"algbw_gbps", algbw},
                          {"busbw_gbps", algbw * bus_factor}};
    if (const auto device_after = communicator.CompletedCollectiveSeconds()) {
      const double kernel_seconds = (*device_after - device_before) / options.iters;
      row["nccl_kernel_us"] = kernel_seconds * 1e6;
      row["nccl_kernel_busbw_gbps"] = static_cast<double>(count * 4) / kernel_seconds / 1e9 * bus_factor;
    }
    if (world.rank == 0) std::cout << row.dump() << std::endl;
  }
  communicator.Barrier("end");
  return 0;
}

}  // namespace
}  // namespace mgpu

int main(int argc, char** argv) {
  mgpu::Options options;
  CLI::App app{"All-reduce bus bandwidth through mgpu's communicator (one process per rank)"};
  app.add_option("--backend", options.backend, "auto (nccl on GPUs, gloo otherwise), nccl, gloo or mpi")
      ->check(CLI::IsMember({"auto", "nccl", "gloo", "mpi"}));
  app.add_option("--min-bytes", options.min_bytes, "smallest size (doubled up to --max-bytes)")->check(CLI::Range(4, 1 << 30));
  app.add_option("--max-bytes", options.max_bytes, "largest size (0: 256 MiB on GPUs, 16 MiB on CPUs)")
      ->check(CLI::Range(int64_t{0}, int64_t{8} << 30));
  app.add_option("--iters", options.iters, "timed all-reduces per size")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", options.warmup, "untimed all-reduces per size")->check(CLI::Range(0, 100000));
  app.add_option("--timeout", options.timeout_seconds, "seconds any rendezvous or collective may take")
      ->check(CLI::Range(1.0, 86400.0));
  CLI11_PARSE(app, argc, argv);
  try {
    return mgpu::Run(options);
  } catch (const mgpu::Error& e) {
    std::cerr << "mgpu-allreduce-bench: " << e.what() << std::endl;
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::cerr << "mgpu-allreduce-bench: " << e.what() << std::endl;
    return 1;
  }
}
