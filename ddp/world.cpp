#include "ddp/world.h"

#include <optional>

#include <fmt/format.h>

#include "common/status.h"
#include "ddp/slurm_environment.h"

namespace mgpu {
namespace {

// Slurm's environment into `world`; returns the source line for the log.
std::string ApplySlurmStep(const SlurmStep& step, const EnvLookup& env, WorldInfo& world) {
  world.rank = step.procid;
  world.world_size = step.ntasks;
  world.local_rank = step.localid;
  world.local_world_size = step.tasks_on_node;
  world.from_slurm = true;
  std::string address = fmt::format("MASTER_ADDR {} (first host of {})", step.first_host, step.nodelist_variable);
  if (const char* addr = env("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    world.master_addr = addr;
    address = fmt::format("MASTER_ADDR {} (set)", addr);
  } else {
    world.master_addr = step.first_host;
  }
  std::string port = fmt::format("MASTER_PORT {} (from SLURM_JOB_ID {})", step.port, step.job_id);
  if (auto set = ReadEnvInt(env, "MASTER_PORT", "you (or the job script)")) {
    world.master_port = *set;
    port = fmt::format("MASTER_PORT {} (set)", *set);
  } else {
    world.master_port = step.port;
  }
  return fmt::format("Slurm environment (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID {} of {}; {}, {})",
                     step.nodeid, step.nnodes, address, port);
}

}  // namespace

WorldInfo ResolveWorld(const WorldFlags& flags, const EnvLookup& env) {
  WorldInfo world;
  const char* kTorchrun = "torchrun";
  const char* kOpenMpi = "mpirun (Open MPI)";
  const std::optional<int> torch_rank = ReadEnvInt(env, "RANK", kTorchrun);
  const std::optional<int> torch_size = ReadEnvInt(env, "WORLD_SIZE", kTorchrun);
  const std::optional<int> mpi_rank = ReadEnvInt(env, "OMPI_COMM_WORLD_RANK", kOpenMpi);
  const std::optional<int> mpi_size = ReadEnvInt(env, "OMPI_COMM_WORLD_SIZE", kOpenMpi);

  std::string env_source;
  if (torch_rank || torch_size) {
    if (!torch_rank || !torch_size) {
      throw BadInputError(
          "torchrun environment is incomplete: RANK and WORLD_SIZE must be set together");
    }
    world.rank = *torch_rank;
    world.world_size = *torch_size;
    world.local_rank = ReadEnvInt(env, "LOCAL_RANK", kTorchrun).value_or(world.rank);
    world.local_world_size = ReadEnvInt(env, "LOCAL_WORLD_SIZE", kTorchrun).value_or(world.world_size);
    if (const char* addr = env("MASTER_ADDR"); addr != nullptr && *addr != '\0') world.master_addr = addr;
    if (auto port = ReadEnvInt(env, "MASTER_PORT", kTorchrun)) world.master_port = *port;
    env_source = "torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)";
  } else if (mpi_rank || mpi_size) {
    if (!mpi_rank || !mpi_size) {
      throw BadInputError("Open MPI environment is incomplete: OMPI_COMM_WORLD_RANK and "
                          "OMPI_COMM_WORLD_SIZE must be set together");
    }
    world.rank = *mpi_rank;
    world.world_size = *mpi_size;
    world.local_rank = ReadEnvInt(env, "OMPI_COMM_WORLD_LOCAL_RANK", kOpenMpi).value_or(world.rank);
    world.local_world_size =
        ReadEnvInt(env, "OMPI_COMM_WORLD_LOCAL_SIZE", kOpenMpi).value_or(world.world_size);
    env_source = "Open MPI environment (OMPI_COMM_WORLD_*)";
  } else if (const std::optional<SlurmStep> step = ReadSlurmStep(env)) {
    env_source = ApplySlurmStep(*step, env, world);
  } else if (InSlurmBatchScript(env)) {
    world.source = "single process (a Slurm job's batch script without srun: start the ranks with srun)";
  }

  const bool any_flag = flags.rank >= 0 || flags.world_size >= 0 || flags.local_rank >= 0 ||
                        !flags.master_addr.empty() || flags.master_port >= 0;
  if (flags.rank >= 0) world.rank = flags.rank;
  if (flags.world_size >= 0) world.world_size = flags.world_size;
  if (flags.local_rank >= 0) world.local_rank = flags.local_rank;
  if (!flags.master_addr.empty()) world.master_addr = flags.master_addr;
  if (flags.master_port >= 0) world.master_port = flags.master_port;
  if (any_flag) {
    world.source = env_source.empty() ? "flags" : "flags over " + env_source;
  } else if (!env_source.empty()) {
    world.source = env_source;
  }

  if (world.world_size < 1) {
    throw BadInputError(fmt::format("world size is {} (from {}); it must be at least 1",
                                    world.world_size, world.source));
  }
  if (world.rank >= world.world_size) {
    throw BadInputError(fmt::format("rank {} is out of range for world size {} (from {}); "
                                    "ranks run from 0 to {}",
                                    world.rank, world.world_size, world.source,
                                    world.world_size - 1));
  }
  if (world.master_port > 65535) {
    throw BadInputError(fmt::format("master port {} (from {}) is not a TCP port (1-65535)",
                                    world.master_port, world.source));
  }
  return world;
}

int DefaultCudaIndex(const WorldInfo& world, int visible_devices) {
  if (world.from_slurm && visible_devices == 1) return 0;
  return world.local_rank;
}

}  // namespace mgpu
