#include "common/server_ports.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

namespace mgpu {
namespace {

constexpr int kFirstUnprivilegedPort = 1024;
constexpr PortRange kLinuxDefaultEphemeralPorts{32768, 60999};
// Ports other jobs take by number: a Slurm step's derived rendezvous port (ddp/slurm_environment.h,
// 20000-29999) and torch.distributed's and mgpu's defaults (29500, 29600).
constexpr PortRange kTakenByNumber{20000, 29999};

bool TakenByNumber(int port) { return port >= kTakenByNumber.low && port <= kTakenByNumber.high; }

}  // namespace

std::optional<PortRange> ParsePortRange(const std::string& text) {
  std::istringstream in(text);
  PortRange range;
  std::string rest;
  if (!(in >> range.low >> range.high) || (in >> rest)) return std::nullopt;
  if (range.low < 1 || range.high > 65535 || range.low > range.high) return std::nullopt;
  return range;
}

PortRange EphemeralPorts() {
  std::ifstream file("/proc/sys/net/ipv4/ip_local_port_range");
  std::stringstream text;
  text << file.rdbuf();
  return ParsePortRange(text.str()).value_or(kLinuxDefaultEphemeralPorts);
}

std::vector<int> ServerPortCandidates(const PortRange& ephemeral, int count) {
  const int end = ephemeral.low;  // one past the last candidate
  if (end <= kFirstUnprivilegedPort || count <= 0) return {};
  const int begin = end / 2 - kFirstUnprivilegedPort >= count ? std::max(end / 2, kFirstUnprivilegedPort)
                                                             : kFirstUnprivilegedPort;
  std::mt19937 random{std::random_device{}()};
  std::uniform_int_distribution<int> pick(begin, end - 1);
  int available = 0;
  for (int port = begin; port < end; ++port) available += TakenByNumber(port) ? 0 : 1;
  std::vector<int> ports;
  const int wanted = std::min(count, available);
  while (static_cast<int>(ports.size()) < wanted) {
    const int port = pick(random);
    if (!TakenByNumber(port) && std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  }
  return ports;
}

}  // namespace mgpu
