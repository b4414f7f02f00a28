#include "worker/numa_binding.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "common/status.h"
#include "cuda/pci_bus_id.h"

namespace mgpu {
namespace {

constexpr int kMaxCpus = 8192;  // the affinity masks' size: larger than any host's CPU count

struct CpuMask {
  explicit CpuMask(const std::vector<int>& cpus) : set(CPU_ALLOC(kMaxCpus)), bytes(CPU_ALLOC_SIZE(kMaxCpus)) {
    CPU_ZERO_S(bytes, set);
    for (int cpu : cpus) {
      if (cpu >= 0 && cpu < kMaxCpus) CPU_SET_S(cpu, bytes, set);
    }
  }
  ~CpuMask() { CPU_FREE(set); }
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;
  cpu_set_t* set;
  size_t bytes;
};

}  // namespace

std::vector<int> AllowedCpus() {
  CpuMask mask({});
  if (sched_getaffinity(0, mask.bytes, mask.set) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (CPU_ISSET_S(cpu, mask.bytes, mask.set)) cpus.push_back(cpu);
  }
  return cpus;
}

void BindEveryThread(const std::vector<int>& cpus) {
  const CpuMask mask(cpus);
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const pid_t thread = static_cast<pid_t>(std::stol(task.path().filename().string()));
    if (sched_setaffinity(thread, mask.bytes, mask.set) != 0 && errno != ESRCH) {  // ESRCH: it has ended
      throw Error(ExitCode::kFailure, fmt::format("cannot bind thread {} to CPUs {}: {}", thread,
                                                  FormatCpuList(cpus), std::strerror(errno)));
    }
  }
}

RankPlacement PlaceRank(int device_index, int visible_devices, const WorldInfo& world,
                        const std::function<int(int)>& node_of_device) {
  RankPlacement place;
  place.gpu_node = node_of_device(device_index);
  const bool sees_every_rank = visible_devices >= world.local_world_size &&
                               device_index == DefaultCudaIndex(world, visible_devices);
  if (!sees_every_rank) {  // the other ranks' GPUs are not visible here: count them all as neighbours
    place.index = world.local_rank;
    place.ranks_there = world.local_world_size;
    return place;
  }
  place.ranks_there = 0;
  for (int rank = 0; rank < world.local_world_size; ++rank) {
    WorldInfo other = world;
    other.local_rank = rank;
    if (node_of_device(DefaultCudaIndex(other, visible_devices)) != place.gpu_node) continue;
    if (rank < world.local_rank) ++place.index;
    ++place.ranks_there;
  }
  return place;
}

std::string ApplyNumaBinding(NumaBinding mode, const torch::Device& device, const WorldInfo& world) {
  if (mode == NumaBinding::kNone) return "";
  if (!device.is_cuda()) {
    throw BadInputError(fmt::format("--numa-binding {} binds a rank to the CPUs near its GPU, and this rank "
                                    "trains on the CPU: use --numa-binding none (or taskset / numactl to pick CPUs)",
                                    mode));
  }
  const auto node_of_device = [](int index) { return PciDeviceNumaNode(kSysfsRoot, CudaPciBusId(index)); };
  const RankPlacement place = PlaceRank(device.index(), static_cast<int>(torch::cuda::device_count()), world,
                                        node_of_device);
  const CpuTopology topology = ReadCpuTopology(kSysfsRoot, AllowedCpus());
  const CpuBinding binding = PlanCpuBinding(mode, topology, place);
  if (binding.cpus.empty()) return fmt::format("--numa-binding {}: left unbound ({})", mode, binding.description);
  BindEveryThread(binding.cpus);
  return fmt::format("--numa-binding {}: CPUs {} ({}; {} at {})", mode, FormatCpuList(binding.cpus),
                     binding.description, device.str(), CudaPciBusId(device.index()));
}

}  // namespace mgpu
