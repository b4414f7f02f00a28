#include "worker/cpu_topology.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/status.h"

namespace mgpu {
namespace {

std::string ReadSmallFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lowest id of the CPU list in `path`, or `fallback` where the file is missing or empty.
int LowestListed(const std::filesystem::path& path, int fallback) {
  const std::vector<int> listed = ParseCpuList(ReadSmallFile(path));
  return listed.empty() ? fallback : listed.front();
}

// cpu id -> NUMA node, from each node's cpulist.
std::map<int, int> NodesOfCpus(const std::filesystem::path& nodes) {
  std::map<int, int> node_of;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(nodes, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 5 || name.size() > 10 || name.compare(0, 4, "node") != 0 ||  // node0 to node999999
        !std::all_of(name.begin() + 4, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      continue;
    }
    for (int cpu : ParseCpuList(ReadSmallFile(entry.path() / "cpulist"))) node_of[cpu] = std::stoi(name.substr(4));
  }
  return node_of;
}

std::vector<int> Ids(const std::vector<CpuTopology::Cpu>& cpus) {
  std::vector<int> ids;
  for (const auto& cpu : cpus) ids.push_back(cpu.id);
  return ids;
}

// The CPUs of `topology` on the GPU's node; all of them where the node is unknown or holds none
// this process may use.
std::vector<CpuTopology::Cpu> NodeCpus(const CpuTopology& topology, int gpu_node, std::string& where) {
  std::vector<CpuTopology::Cpu> on_node;
  for (const auto& cpu : topology.cpus) {
    if (cpu.node == gpu_node) on_node.push_back(cpu);
  }
  if (gpu_node >= 0 && !on_node.empty()) {
    where = fmt::format("NUMA node {}", gpu_node);
    return on_node;
  }
  where = gpu_node < 0 ? "every CPU of the process (the GPU's NUMA node is unknown)"
                       : fmt::format("every CPU of the process (none of NUMA node {} is allowed)", gpu_node);
  return topology.cpus;
}

// `cpus` grouped by `key` (core or L3 domain), groups ordered by their lowest CPU.
std::vector<std::vector<int>> GroupedBy(const std::vector<CpuTopology::Cpu>& cpus, int CpuTopology::Cpu::*key) {
  std::map<int, std::vector<int>> groups;
  for (const auto& cpu : cpus) groups[cpu.*key].push_back(cpu.id);
  std::vector<std::vector<int>> ordered;
  for (auto& [first, ids] : groups) ordered.push_back(std::move(ids));
  std::sort(ordered.begin(), ordered.end());
  return ordered;
}

CpuBinding ExclusiveShare(const std::vector<CpuTopology::Cpu>& cpus, const std::string& where,
                          const RankPlacement& placement) {
  const std::vector<std::vector<int>> cores = GroupedBy(cpus, &CpuTopology::Cpu::core);
  const int ranks = std::max(placement.ranks_there, 1);
  if (static_cast<int>(cores.size()) < ranks) {
    throw BadInputError(fmt::format(
        "--numa-binding exclusive: {} ranks bind to {}, which has {} cores for them: each needs one of its own; "
        "use --numa-binding node (the ranks then share the node's CPUs) or fewer ranks per node",
        ranks, where, cores.size()));
  }
  const size_t begin = cores.size() * placement.index / ranks, end = cores.size() * (placement.index + 1) / ranks;
  CpuBinding binding;
  for (size_t i = begin; i < end; ++i) binding.cpus.insert(binding.cpus.end(), cores[i].begin(), cores[i].end());
  std::sort(binding.cpus.begin(), binding.cpus.end());
  binding.description = fmt::format("{} of the {} cores of {}: share {} of the {} ranks bound there", end - begin,
                                    cores.size(), where, placement.index + 1, ranks);
  return binding;
}

}  // namespace

std::vector<int> ParseCpuList(const std::string& text) {
  std::set<int> ids;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    item.erase(std::remove_if(item.begin(), item.end(), [](unsigned char c) { return std::isspace(c); }), item.end());
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    try {
      size_t used = 0;
      const int first = std::stoi(item.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? item.size() : dash)) return {};
      const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1), &used);
      if (dash != std::string::npos && used != item.size() - dash - 1) return {};
      if (first < 0 || last < first || last - first > 1 << 20) return {};
      for (int id = first; id <= last; ++id) ids.insert(id);
    } catch (const std::exception&) {
      return {};
    }
  }
  return {ids.begin(), ids.end()};
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + (j == i ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
    i = j + 1;
  }
  return text;
}

CpuTopology ReadCpuTopology(const std::string& sysfs, const std::vector<int>& allowed) {
  const std::filesystem::path root(sysfs);
  const std::map<int, int> node_of = NodesOfCpus(root / "devices/system/node");
  CpuTopology topology;
  for (int id : allowed) {
    const std::filesystem::path cpu = root / "devices/system/cpu" / fmt::format("cpu{}", id);
    CpuTopology::Cpu entry;
    entry.id = id;
    const auto node = node_of.find(id);
    entry.node = node == node_of.end() ? 0 : node->second;
    const std::vector<int> package = ParseCpuList(ReadSmallFile(cpu / "topology/physical_package_id"));
    entry.package = package.empty() ? 0 : package.front();
    entry.core = LowestListed(cpu / "topology/core_cpus_list", LowestListed(cpu / "topology/thread_siblings_list", id));
    entry.l3 = LowestListed(cpu / "cache/index3/shared_cpu_list", entry.core);
    topology.cpus.push_back(entry);
  }
  std::sort(topology.cpus.begin(), topology.cpus.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return topology;
}

int PciDeviceNumaNode(const std::string& sysfs, const std::string& bus_id) {
  std::string lower = bus_id;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.empty() || lower.find('/') != std::string::npos || lower.find("..") != std::string::npos) return -1;
  const std::string text = ReadSmallFile(std::filesystem::path(sysfs) / "bus/pci/devices" / lower / "numa_node");
  try {
    return std::max(std::stoi(text), -1);
  } catch (const std::exception&) {
    return -1;
  }
}

CpuBinding PlanCpuBinding(NumaBinding mode, const CpuTopology& topology, const RankPlacement& placement) {
  if (mode == NumaBinding::kNone) return {Ids(topology.cpus), "none: every CPU the process may use"};
  std::string where;
  const std::vector<CpuTopology::Cpu> node_cpus = NodeCpus(topology, placement.gpu_node, where);
  if (node_cpus.empty()) return {{}, "no CPU this process may use is known"};
  switch (mode) {
    case NumaBinding::kNode:
      return {Ids(node_cpus), where};
    case NumaBinding::kSocket: {
      std::set<int> packages;
      for (const auto& cpu : node_cpus) packages.insert(cpu.package);
      std::vector<CpuTopology::Cpu> on_sockets;
      for (const auto& cpu : topology.cpus) {
        if (packages.count(cpu.package)) on_sockets.push_back(cpu);
      }
      return {Ids(on_sockets), fmt::format("the socket(s) {} of {}", fmt::join(packages, ","), where)};
    }
    case NumaBinding::kExclusive:
      return ExclusiveShare(node_cpus, where, placement);
    case NumaBinding::kCoreComplex: {
      const std::vector<std::vector<int>> domains = GroupedBy(node_cpus, &CpuTopology::Cpu::l3);
      const size_t pick = static_cast<size_t>(placement.index) % domains.size();
      return {domains[pick], fmt::format("L3 cache domain {} of the {} of {}", pick + 1, domains.size(), where)};
    }
    case NumaBinding::kNone:
      break;
  }
  return {Ids(topology.cpus), "none"};
}

}  // namespace mgpu
