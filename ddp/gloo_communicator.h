// The gloo backend: c10d's ProcessGroupGloo (from LibTorch) over a c10d Store.
#pragma once

#include <chrono>
#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddp/communicator.h"

namespace mgpu {

// Connects to the other ranks through `store` (every rank must call this). `interface_host`
// is the address this rank's Gloo device binds to (the master address's interface works on one
// host). Throws CollectiveError if the group cannot form within `timeout`.
std::unique_ptr<Communicator> MakeGlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                   int size, const std::string& interface_host,
                                                   std::chrono::milliseconds timeout);

}  // namespace mgpu
