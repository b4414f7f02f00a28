// The gloo backend: c10d's ProcessGroupGloo (from LibTorch) over a c10d Store.
#pragma once

#include <chrono>
#include <memory>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddp/communicator.h"
#include "ddp/gloo_interface.h"

namespace mgpu {

// Connects to the other ranks through `store` (every rank must call this), with one Gloo device
// per named interface, or one bound to `interface.bind_address` (ddp/gloo_interface.h chooses).
// Throws CollectiveError if the group cannot form within `timeout`.
std::unique_ptr<Communicator> MakeGlooCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                   int size, const GlooInterface& interface,
                                                   std::chrono::milliseconds timeout);

}  // namespace mgpu
