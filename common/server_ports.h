// Where to look for a free port that other processes will connect to after it is chosen (the
// rendezvous port `mgpu run` hands its workers, the tests' MASTER_PORT).
//
// A port found free by binding port 0 comes from the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), the range outgoing connections take their own ports
// from: between the choice and the worker's listen (a second or more of start-up), any connection
// on the host can take it, and rank 0 then fails with "the port is taken" (seen on a GPU host
// busy with NCCL's and DataLoader workers' connections). Below that range only a server that
// binds the port by number can take it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgpu {

struct PortRange {
  int low = 0;   // first port
  int high = 0;  // last port
};

// ip_local_port_range's text ("32768\t60999\n"); nullopt unless two ports, low <= high.
std::optional<PortRange> ParsePortRange(const std::string& text);

// This machine's ephemeral range; Linux's default, 32768-60999, where the file cannot be read.
PortRange EphemeralPorts();

// `count` distinct ports to try in order, drawn at random from 1024 up to below `ephemeral`'s low
// end (from half of it when that leaves enough room, so that well-known services' ports are
// skipped), never 20000-29999, where Slurm steps and torch.distributed take theirs by number.
// Fewer where fewer are left; empty when no port lies below the range.
std::vector<int> ServerPortCandidates(const PortRange& ephemeral, int count);

}  // namespace mgpu
