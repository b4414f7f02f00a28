// The host's CPUs as Linux describes them under /sys (NUMA nodes, sockets, cores, L3 cache
// domains, a PCI device's NUMA node), and the CPU set that each --numa-binding mode gives one rank
// (torchrun's modes). Read by hand from sysfs, a stable kernel interface of six kinds of file, rather
// than through hwloc: mgpu needs only these, and a new library would be a new dependency of every
// build for them. Tests point `sysfs` at a made-up tree.
#pragma once

#include <string>
#include <vector>

#include "config/choices.h"

namespace mgpu {

inline constexpr char kSysfsRoot[] = "/sys";

struct CpuTopology {
  struct Cpu {
    int id = 0;
    int node = 0;     // NUMA node (0 where the kernel lists none)
    int package = 0;  // socket
    int core = 0;     // the lowest CPU id of its core (SMT siblings share it)
    int l3 = 0;       // the lowest CPU id sharing its L3 cache (its core, where the kernel lists no L3)
  };
  std::vector<Cpu> cpus;  // the CPUs this process may run on, by id
};

// The CPUs in `allowed` as sysfs under `sysfs` describes them. A file it lacks leaves that
// field's fallback (above); a CPU id it cannot place at all keeps node, package 0 and its own
// core, as one flat node.
CpuTopology ReadCpuTopology(const std::string& sysfs, const std::vector<int>& allowed);

// The NUMA node of the PCI device `bus_id` ("0000:1a:00.0", any case), or -1 where the kernel
// does not say (no such device, no NUMA information: many VMs report -1).
int PciDeviceNumaNode(const std::string& sysfs, const std::string& bus_id);

// Where a rank's GPU sits and how many of this host's ranks bind to the same node: what the
// exclusive and core-complex modes divide among.
struct RankPlacement {
  int gpu_node = -1;    // -1: unknown; every allowed CPU then counts as the GPU's node
  int index = 0;        // this rank's place among the ranks bound to gpu_node, from 0
  int ranks_there = 1;  // those ranks, this one included
};

struct CpuBinding {
  std::vector<int> cpus;    // ascending; all of `topology`'s for NumaBinding::kNone
  std::string description;  // what was chosen and why, for the log
};

// The CPUs `mode` gives the rank at `placement`. Throws BadInputError (exit 2) where the mode
// cannot be met on this host: exclusive with fewer cores on the node than ranks bound to it.
CpuBinding PlanCpuBinding(NumaBinding mode, const CpuTopology& topology, const RankPlacement& placement);

// "0-3,8-11": ascending ids in ranges, as sysfs and taskset write them.
std::string FormatCpuList(const std::vector<int>& cpus);

// sysfs's list format ("0-3,8-11\n") as ids, ascending; empty for an empty or malformed list.
std::vector<int> ParseCpuList(const std::string& text);

}  // namespace mgpu
