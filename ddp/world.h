// Where a worker learns its rank: flags, torchrun's environment, Open MPI's, or Slurm's.
//
// Precedence per field: flag > torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) > Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE)
// > Slurm, in a task of an srun step (ddp/slurm_environment.h: SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, the first host of the step's node list as the master address unless
// MASTER_ADDR is set, a port derived from SLURM_JOB_ID unless MASTER_PORT is set)
// > a single process. `source` says which was used, for the worker's log.
#pragma once

#include <string>

#include "ddp/environment.h"

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
  bool from_slurm = false;  // the ranks came from an srun step (see DefaultCudaIndex)
};

// Throws BadInputError for malformed or inconsistent values, naming the variable or flag.
WorldInfo ResolveWorld(const WorldFlags& flags, const EnvLookup& env);

// The CUDA device a rank uses when --device does not name one, among the `visible_devices` it
// sees (CUDA_VISIBLE_DEVICES already restricts them): its local rank. Under Slurm, a task that
// sees exactly one GPU uses it, cuda:0: Slurm bound that GPU to the task (--gpus-per-task=1,
// --gpu-bind=single:1), and SLURM_LOCALID would point past it. The caller checks the range.
int DefaultCudaIndex(const WorldInfo& world, int visible_devices);

}  // namespace mgpu
