// `mgpu run`'s own flags (torchrun's names, kebab-case; torchrun's snake_case spellings are
// aliases). Every other argument is a worker flag, passed to each mgpu-worker unchanged.
// --nnodes, --node-rank, --nproc-per-node, --master-addr and --master-port left out come from
// Kubeflow's or Slurm's environment where one applies (launcher/run/node_environment.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ddp/world.h"

namespace mgpu {

struct RunOptions {
  std::string nproc_per_node = "auto";  // a count, or auto: visible GPUs, else 2
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";  // where rank 0 serves the TCPStore (and node 0 the coordinator)
  int master_port = -1;                   // -1: a free port (one node), 29500 (several)
  int coordinator_port = -1;              // -1: a free port (one node), master_port + 1 (several)
  int max_restarts = 0;
  std::string log_dir;                    // empty: <out>/logs
  bool tee = false;
  double heartbeat_timeout = 60;          // seconds
  std::string token;                      // --token, else MGPU_TOKEN
  std::string tls_cert, tls_key, tls_ca;
  std::vector<std::string> worker_args;
  std::string layout_source;  // where the node layout came from, for the start-up log; "" for flags and defaults
};

// The usage text of `mgpu run --help`.
std::string RunUsage();

// Parses `args` (after `mgpu run`). Returns nullopt for --help. Throws BadInputError naming the
// flag for a bad value, and for unsafe combinations: listening beyond loopback needs a token
// or TLS.
std::optional<RunOptions> ParseRunOptions(const std::vector<std::string>& args, const EnvLookup& env);

}  // namespace mgpu
