// The mpi backend: Open MPI's non-blocking collectives on CPU tensors, with waits that poll
// (MPI_Test) against a deadline instead of blocking in MPI_Wait.
#pragma once

#include <chrono>
#include <memory>

#include "ddp/communicator.h"

namespace mgpu {

// Initializes MPI once per process (MPI_Init_thread; finalized at exit) and returns this
// process's rank and size in MPI_COMM_WORLD.
struct MpiWorld {
  int rank = 0;
  int size = 1;
};
MpiWorld InitializeMpi();

// Broadcasts `bytes` from rank 0 over MPI_COMM_WORLD (for bootstrapping other backends).
void MpiBroadcastBytes(std::string& bytes);

std::unique_ptr<Communicator> MakeMpiCommunicator(std::chrono::milliseconds timeout);

}  // namespace mgpu
