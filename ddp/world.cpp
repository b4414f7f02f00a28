#include "ddp/world.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "common/status.h"

namespace mgpu {
namespace {

std::optional<int> EnvInt(const EnvLookup& env, const char* name, const char* set_by) {
  const char* value = env(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || parsed < 0 || parsed > 1'000'000) {
    throw BadInputError(fmt::format(
        "environment variable {}='{}' is not a non-negative integer (it is normally set by {}); "
        "unset it or fix its value",
        name, value, set_by));
  }
  return static_cast<int>(parsed);
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

WorldInfo ResolveWorld(const WorldFlags& flags, const EnvLookup& env) {
  WorldInfo world;
  const char* kTorchrun = "torchrun";
  const char* kOpenMpi = "mpirun (Open MPI)";
  const std::optional<int> torch_rank = EnvInt(env, "RANK", kTorchrun);
  const std::optional<int> torch_size = EnvInt(env, "WORLD_SIZE", kTorchrun);
  const std::optional<int> mpi_rank = EnvInt(env, "OMPI_COMM_WORLD_RANK", kOpenMpi);
  const std::optional<int> mpi_size = EnvInt(env, "OMPI_COMM_WORLD_SIZE", kOpenMpi);

  std::string env_source;
  if (torch_rank || torch_size) {
    if (!torch_rank || !torch_size) {
      throw BadInputError(
          "torchrun environment is incomplete: RANK and WORLD_SIZE must be set together");
    }
    world.rank = *torch_rank;
    world.world_size = *torch_size;
    world.local_rank = EnvInt(env, "LOCAL_RANK", kTorchrun).value_or(world.rank);
    world.local_world_size = EnvInt(env, "LOCAL_WORLD_SIZE", kTorchrun).value_or(world.world_size);
    if (const char* addr = env("MASTER_ADDR"); addr != nullptr && *addr != '\0') world.master_addr = addr;
    if (auto port = EnvInt(env, "MASTER_PORT", kTorchrun)) world.master_port = *port;
    env_source = "torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)";
  } else if (mpi_rank || mpi_size) {
    if (!mpi_rank || !mpi_size) {
      throw BadInputError("Open MPI environment is incomplete: OMPI_COMM_WORLD_RANK and "
                          "OMPI_COMM_WORLD_SIZE must be set together");
    }
    world.rank = *mpi_rank;
    world.world_size = *mpi_size;
    world.local_rank = EnvInt(env, "OMPI_COMM_WORLD_LOCAL_RANK", kOpenMpi).value_or(world.rank);
    world.local_world_size =
        EnvInt(env, "OMPI_COMM_WORLD_LOCAL_SIZE", kOpenMpi).value_or(world.world_size);
    env_source = "Open MPI environment (OMPI_COMM_WORLD_*)";
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

}  // namespace mgpu
