// Slurm's hostlist expressions (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST), expanded into host
// names in Slurm's order, as `scontrol show hostnames` prints them.
//
// Grammar (Slurm 22.05's, checked against scontrol; tests/integration/slurm_cluster_test.cpp):
//   list  := item ((',' | whitespace)+ item)*      empty items are skipped, as Slurm does
//   item  := text ('[' ranges ']' text)*            no text after the last ']'
//   ranges:= range (',' range)*,  range := N | N-M  (N <= M; digits only)
// A range pads to the width of N ("n[08-11]" is n08 n09 n10 n11; "n[8-11]" is n8 ... n11).
// Several bracket groups expand to every combination ("n[1-2]-ib[3-4]": n1-ib3 n1-ib4 n2-ib3
// n2-ib4), the first group varying slowest; Slurm lists three or more groups in another order,
// but their first host is the same. BlueGene's "bgl[123x456]" boxes are not supported.
#pragma once

#include <string>
#include <vector>

namespace mgpu {

// At most this many hosts: a larger list is a mistake, not a cluster (and would exhaust memory).
inline constexpr size_t kMaxSlurmNodelistHosts = 1 << 20;

// Throws BadInputError for a malformed or empty list, naming `variable` (the environment
// variable it came from) and the 1-based character position of the fault.
std::vector<std::string> ExpandSlurmNodelist(const std::string& nodelist, const std::string& variable);

}  // namespace mgpu
