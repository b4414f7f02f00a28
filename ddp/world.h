// Where a worker learns its rank: flags, torchrun's environment, or Open MPI's.
//
// Precedence per field: flag > torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) > Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE)
// > a single process. `source` says which was used, for the worker's log.
#pragma once

#include <functional>
#include <string>

namespace mgpu {

struct WorldFlags {
  int rank = -1;        // -1: not given on the command line
  int world_size = -1;
  int local_rank = -1;
  std::string master_addr;
  int master_port = -1;
};

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "single process (no rank flags or environment)";
};

// Looks up an environment variable; returns nullptr when unset. Tests pass a fake.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup ProcessEnvironment();

// Throws BadInputError for malformed or inconsistent values, naming the variable or flag.
WorldInfo ResolveWorld(const WorldFlags& flags, const EnvLookup& env);

}  // namespace mgpu
