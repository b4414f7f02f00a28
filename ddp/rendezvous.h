// Forms a job's communicator from what the worker knows about its world.
//
//   --backend mpi   needs mpirun: MPI_COMM_WORLD is the group.
//   --backend gloo  a c10d TCPStore: at MASTER_ADDR:MASTER_PORT (rank 0 serves) when started by
//   --backend nccl  torchrun or flags; under mpirun, rank 0 serves on a free port and sends the
//                   address to the others with MPI_Bcast. NCCL's unique id (made by rank 0)
//                   travels through the store, or through MPI_Bcast under mpirun.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "ddp/communicator.h"
#include "ddp/nccl_communicator.h"
#include "ddp/world.h"

namespace mgpu {

struct RendezvousResult {
  std::unique_ptr<Communicator> communicator;
  std::string description;  // for the log: backend, bootstrap, addresses
};

// `world.source` decides the bootstrap (Open MPI's environment → MPI). Throws BadInputError for
// an impossible combination (mpi without mpirun, nccl on a CPU device, a taken master port)
// and CollectiveError when the ranks do not meet within `timeout`. `nccl`: see
// ddp/nccl_communicator.h (ignored by the other backends).
RendezvousResult Rendezvous(const WorldInfo& world, const std::string& backend, const torch::Device& device,
                            std::chrono::milliseconds timeout, const NcclOptions& nccl);

// The backend to use when --backend is auto: nccl on GPUs, gloo on CPUs.
std::string DefaultBackend(const torch::Device& device);

}  // namespace mgpu
