// Specification of --numa-binding (worker/cpu_topology.h, worker/numa_binding.h): the host's CPUs
// as sysfs describes them, and the CPUs each of torchrun's modes gives a rank, on a made-up
// two-socket host; and the binding reaching every thread of the process.
#include <gtest/gtest.h>

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "tests/support/test_support.h"
#include "worker/cpu_topology.h"
#include "worker/numa_binding.h"

namespace mgpu {
namespace {

using mgpu::testing::BadInputMessage;
using mgpu::testing::TempDir;

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  mgpu::testing::WriteBytes(path, text);
}

std::vector<int> Range(int first, int last) {
  std::vector<int> ids;
  for (int id = first; id <= last; ++id) ids.push_back(id);
  return ids;
}

// Two sockets. Socket 0 is NUMA node 0: cores 0-3, SMT siblings 8-11, two L3 domains of two cores.
// Socket 1 holds node 1 (cores 4-7, siblings 12-15, two L3 domains) and node 2 (CPUs 16-19, no
// SMT, one L3 domain). GPUs: 0000:1a:00.0 on node 1, 0000:3b:00.0 on node 0, 0000:5c:00.0 unknown.
class FakeHost : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string root = sysfs_.path();
    WriteFile(root + "/devices/system/node/node0/cpulist", "0-3,8-11\n");
    WriteFile(root + "/devices/system/node/node1/cpulist", "4-7,12-15\n");
    WriteFile(root + "/devices/system/node/node2/cpulist", "16-19\n");
    WriteFile(root + "/devices/system/node/possible", "0-2\n");  // not a nodeN folder: ignored
    for (int cpu = 0; cpu < 20; ++cpu) {
      const std::string dir = root + "/devices/system/cpu/cpu" + std::to_string(cpu);
      const bool smt = cpu < 16;
      const int core = smt ? cpu % 8 : cpu;
      const int package = (cpu % 8 < 4 && smt) ? 0 : 1;
      WriteFile(dir + "/topology/physical_package_id", std::to_string(package) + "\n");
      WriteFile(dir + "/topology/core_cpus_list", smt ? std::to_string(core) + "," + std::to_string(core + 8) + "\n"
                                                       : std::to_string(cpu) + "\n");
      const int l3 = smt ? core / 2 * 2 : 16;
      WriteFile(dir + "/cache/index3/shared_cpu_list",
                 smt ? std::to_string(l3) + "-" + std::to_string(l3 + 1) + "," + std::to_string(l3 + 8) + "-" +
                           std::to_string(l3 + 9) + "\n"
                     : "16-19\n");
    }
    WriteFile(root + "/bus/pci/devices/0000:1a:00.0/numa_node", "1\n");
    WriteFile(root + "/bus/pci/devices/0000:3b:00.0/numa_node", "0\n");
    WriteFile(root + "/bus/pci/devices/0000:5c:00.0/numa_node", "-1\n");
  }

  CpuTopology Topology(const std::vector<int>& allowed = Range(0, 19)) const {
    return ReadCpuTopology(sysfs_.path(), allowed);
  }

  TempDir sysfs_;
};

TEST(CpuList, ParsesRangesAndSingleIdsAndFormatsThemBackAsSysfsWritesThem) {
  EXPECT_EQ(ParseCpuList("0-3,8-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(ParseCpuList("5"), (std::vector<int>{5}));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 9, 10, 11}), "0-3,8-11");
  EXPECT_EQ(FormatCpuList({4, 6, 7}), "4,6-7");
  for (const std::string bad : {"3-1", "a", "1-", "-1", "1-2-3", "0-99999999"}) {
    EXPECT_TRUE(ParseCpuList(bad).empty()) << bad;
  }
}

TEST_F(FakeHost, ReadsEachCpusNodeSocketCoreAndL3Domain) {
  const CpuTopology topology = Topology();
  ASSERT_EQ(topology.cpus.size(), 20u);
  const CpuTopology::Cpu& sibling = topology.cpus[13];
  EXPECT_EQ(sibling.id, 13);
  EXPECT_EQ(sibling.node, 1);
  EXPECT_EQ(sibling.package, 1);
  EXPECT_EQ(sibling.core, 5) << "SMT siblings share the lowest id of their core";
  EXPECT_EQ(sibling.l3, 4);
  EXPECT_EQ(topology.cpus[17].node, 2);
  EXPECT_EQ(topology.cpus[17].core, 17);
}

TEST(CpuTopology, AHostWithoutTheFilesIsOneFlatNodeWithACorePerCpu) {
  TempDir empty;
  const CpuTopology topology = ReadCpuTopology(empty.path(), {0, 1, 2});
  ASSERT_EQ(topology.cpus.size(), 3u);
  for (const auto& cpu : topology.cpus) {
    EXPECT_EQ(cpu.node, 0);
    EXPECT_EQ(cpu.package, 0);
    EXPECT_EQ(cpu.core, cpu.id);
    EXPECT_EQ(cpu.l3, cpu.id);
  }
}

TEST_F(FakeHost, APciDevicesNodeIsReadWhateverTheCaseOfItsAddress) {
  EXPECT_EQ(PciDeviceNumaNode(sysfs_.path(), "0000:1A:00.0"), 1);
  EXPECT_EQ(PciDeviceNumaNode(sysfs_.path(), "0000:3b:00.0"), 0);
  EXPECT_EQ(PciDeviceNumaNode(sysfs_.path(), "0000:5c:00.0"), -1) << "as a VM without NUMA information says";
  EXPECT_EQ(PciDeviceNumaNode(sysfs_.path(), "0000:ff:00.0"), -1) << "no such device";
  EXPECT_EQ(PciDeviceNumaNode(sysfs_.path(), ""), -1) << "no CUDA";
  EXPECT_EQ(PciDeviceNumaNode(sysfs_.path(), "../../devices/system/node/node1"), -1) << "not a path";
}

TEST_F(FakeHost, NoneLeavesEveryAllowedCpu) {
  EXPECT_EQ(PlanCpuBinding(NumaBinding::kNone, Topology(Range(2, 9)), {1, 0, 1}).cpus, Range(2, 9));
}

TEST_F(FakeHost, NodeGivesTheGpusNodeWithinTheCpusTheProcessMayUse) {
  EXPECT_EQ(PlanCpuBinding(NumaBinding::kNode, Topology(), {1, 0, 1}).cpus,
            (std::vector<int>{4, 5, 6, 7, 12, 13, 14, 15}));
  const CpuBinding under_taskset = PlanCpuBinding(NumaBinding::kNode, Topology(Range(0, 5)), {1, 0, 1});
  EXPECT_EQ(under_taskset.cpus, (std::vector<int>{4, 5}));
  EXPECT_EQ(under_taskset.description, "NUMA node 1");
}

TEST_F(FakeHost, AnUnknownOrDisallowedNodeFallsBackToEveryAllowedCpuAndSaysWhy) {
  const CpuBinding unknown = PlanCpuBinding(NumaBinding::kNode, Topology(), {-1, 0, 1});
  EXPECT_EQ(unknown.cpus, Range(0, 19));
  EXPECT_NE(unknown.description.find("the GPU's NUMA node is unknown"), std::string::npos) << unknown.description;
  const CpuBinding disallowed = PlanCpuBinding(NumaBinding::kNode, Topology(Range(0, 3)), {2, 0, 1});
  EXPECT_EQ(disallowed.cpus, Range(0, 3));
  EXPECT_NE(disallowed.description.find("none of NUMA node 2 is allowed"), std::string::npos) << disallowed.description;
}

TEST_F(FakeHost, SocketGivesEveryCpuOfTheNodesSocket) {
  std::vector<int> socket1 = Range(4, 7);
  for (int id : Range(12, 19)) socket1.push_back(id);
  EXPECT_EQ(PlanCpuBinding(NumaBinding::kSocket, Topology(), {2, 0, 1}).cpus, socket1)
      << "node 2's socket also holds node 1";
}

TEST_F(FakeHost, ExclusiveSplitsTheNodesCoresAmongItsRanksKeepingSmtSiblingsTogether) {
  const CpuTopology topology = Topology();
  const CpuBinding first = PlanCpuBinding(NumaBinding::kExclusive, topology, {0, 0, 2});
  EXPECT_EQ(first.cpus, (std::vector<int>{0, 1, 8, 9}));
  EXPECT_EQ(first.description, "2 of the 4 cores of NUMA node 0: share 1 of the 2 ranks bound there");
  EXPECT_EQ(PlanCpuBinding(NumaBinding::kExclusive, topology, {0, 1, 2}).cpus, (std::vector<int>{2, 3, 10, 11}));
  std::vector<int> seen;
  for (int index = 0; index < 3; ++index) {
    const std::vector<int> share = PlanCpuBinding(NumaBinding::kExclusive, topology, {0, index, 3}).cpus;
    EXPECT_FALSE(share.empty()) << "share " << index;
    seen.insert(seen.end(), share.begin(), share.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11})) << "three shares cover the node once";
}

TEST_F(FakeHost, ExclusiveWithMoreRanksThanCoresIsBadInputNamingTheWayOut) {
  const std::string message =
      BadInputMessage([&] { PlanCpuBinding(NumaBinding::kExclusive, Topology(), {2, 0, 5}); });
  EXPECT_NE(message.find("5 ranks bind to NUMA node 2, which has 4 cores"), std::string::npos) << message;
  EXPECT_NE(message.find("use --numa-binding node"), std::string::npos) << message;
}

TEST_F(FakeHost, CoreComplexGivesTheRanksOnANodeItsL3DomainsInTurn) {
  const CpuTopology topology = Topology();
  EXPECT_EQ(PlanCpuBinding(NumaBinding::kCoreComplex, topology, {1, 0, 3}).cpus, (std::vector<int>{4, 5, 12, 13}));
  EXPECT_EQ(PlanCpuBinding(NumaBinding::kCoreComplex, topology, {1, 1, 3}).cpus, (std::vector<int>{6, 7, 14, 15}));
  EXPECT_EQ(PlanCpuBinding(NumaBinding::kCoreComplex, topology, {1, 2, 3}).cpus, (std::vector<int>{4, 5, 12, 13}))
      << "more ranks than domains share them round robin";
}

TEST(PlaceRank, CountsTheLocalRanksWhoseGpusShareItsNode) {
  WorldInfo world;
  world.local_world_size = 4;
  world.local_rank = 3;
  const auto node_of_device = [](int index) { return index < 2 ? 0 : 1; };
  const RankPlacement place = PlaceRank(3, 4, world, node_of_device);
  EXPECT_EQ(place.gpu_node, 1);
  EXPECT_EQ(place.index, 1);
  EXPECT_EQ(place.ranks_there, 2);
}

TEST(PlaceRank, ARankThatSeesOnlyItsOwnGpuCountsEveryLocalRankAsANeighbour) {
  WorldInfo world;
  world.local_world_size = 4;
  world.local_rank = 2;
  world.from_slurm = true;  // srun bound one GPU to each task: cuda:0 here
  const RankPlacement place = PlaceRank(0, 1, world, [](int) { return 1; });
  EXPECT_EQ(place.gpu_node, 1);
  EXPECT_EQ(place.index, 2);
  EXPECT_EQ(place.ranks_there, 4);
}

TEST(BindEveryThread, ReachesThreadsThatAlreadyRun) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::mutex mutex;
  std::condition_variable changed;
  pid_t other = 0;
  bool done = false;
  std::thread waiting([&] {
    std::unique_lock<std::mutex> lock(mutex);
    other = static_cast<pid_t>(syscall(SYS_gettid));
    changed.notify_all();
    changed.wait(lock, [&] { return done; });
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return other != 0; });
  }
  BindEveryThread({allowed.front()});
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(other, sizeof(set), &set), 0);
  EXPECT_EQ(CPU_COUNT(&set), 1);
  EXPECT_TRUE(CPU_ISSET(allowed.front(), &set));
  BindEveryThread(allowed);  // as the test found it, for the tests after it
  EXPECT_EQ(AllowedCpus(), allowed);
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  changed.notify_all();
  waiting.join();
}

}  // namespace
}  // namespace mgpu
