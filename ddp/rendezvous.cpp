#include "ddp/rendezvous.h"

#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>

#include "ddp/gloo_communicator.h"
#include "ddp/gloo_interface.h"
#include "ddp/mpi_communicator.h"
#ifdef MGPU_WITH_NCCL
#include "ddp/nccl_communicator.h"
#endif

namespace mgpu {
namespace {

bool StartedByMpirun(const WorldInfo& world) { return world.source.find("Open MPI") != std::string::npos; }

std::string ThisHost() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

// Opens the store: rank 0 serves, the others connect. With `wait_for_workers`, rank 0's call
// returns once every rank has connected.
c10::intrusive_ptr<c10d::TCPStore> OpenStore(const std::string& host, int port, const WorldInfo& world,
                                             bool wait_for_workers, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(port);
  options.isServer = world.rank == 0;
  options.numWorkers = world.world_size;
  options.waitWorkers = wait_for_workers;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const c10::Error& e) {
    const std::string text = e.what_without_backtrace();
    if (world.rank == 0 && text.find("in use") != std::string::npos) {
      throw BadInputError(fmt::format("cannot serve the rendezvous at {}:{}: the port is taken; pick another "
                                      "--master-port (or MASTER_PORT)", host, port));
    }
    throw CollectiveError(fmt::format("rank {} could not meet the other ranks at the rendezvous {}:{} within {} s "
                                      "({} ranks expected): {}",
                                      world.rank, host, port, timeout.count() / 1000, world.world_size, text));
  }
}

// Under mpirun: rank 0 serves a store on a free port and sends "host:port" with MPI_Bcast.
c10::intrusive_ptr<c10d::TCPStore> OpenStoreOverMpi(const WorldInfo& world, std::chrono::milliseconds timeout,
                                                    std::string& host, int& port) {
  const bool one_host = world.local_world_size == world.world_size;
  std::string address;
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (world.rank == 0) {
    host = one_host ? "127.0.0.1" : ThisHost();
    store = OpenStore(host, 0, world, /*wait_for_workers=*/false, timeout);
    address = fmt::format("{}:{}", host, store->getPort());
  }
  MpiBroadcastBytes(address);
  const size_t colon = address.rfind(':');
  host = address.substr(0, colon);
  port = std::stoi(address.substr(colon + 1));
  if (world.rank != 0) store = OpenStore(host, port, world, false, timeout);
  return store;
}

}  // namespace

std::string DefaultBackend(const torch::Device& device) { return device.is_cuda() ? "nccl" : "gloo"; }

RendezvousResult Rendezvous(const WorldInfo& world, const std::string& backend, const torch::Device& device,
                            std::chrono::milliseconds timeout, const NcclOptions& nccl) {
  RendezvousResult result;
  if (backend == "mpi") {
    if (!StartedByMpirun(world)) {
      throw BadInputError("--backend mpi needs the workers to be started by mpirun (e.g. `mpirun -np 2 "
                          "mgpu-worker --mode ddp --backend mpi ...`); use --backend gloo under torchrun");
    }
    if (device.is_cuda()) {
      throw BadInputError("--backend mpi reduces CPU tensors; use --backend nccl with --device cuda");
    }
    result.communicator = MakeMpiCommunicator(timeout);
    result.description = fmt::format("mpi over MPI_COMM_WORLD ({} ranks)", result.communicator->size());
    return result;
  }
  if (backend == "nccl" && !device.is_cuda()) {
    throw BadInputError("--backend nccl needs --device cuda; use --backend gloo on CPUs");
  }
  if (backend == "gloo" && device.is_cuda()) {
    throw BadInputError("this build's gloo backend reduces CPU tensors; use --backend nccl with --device cuda");
  }

  const bool mpirun = StartedByMpirun(world);
  if (mpirun) InitializeMpi();
#ifdef MGPU_WITH_NCCL
  if (backend == "nccl" && mpirun) {
    std::string id = world.rank == 0 ? NewNcclUniqueId() : std::string();
    MpiBroadcastBytes(id);
    result.communicator = MakeNcclCommunicator(id, world.rank, world.world_size, device.index(), timeout, nccl);
    result.description = fmt::format("nccl on cuda:{}, unique id sent with MPI_Bcast", device.index());
    return result;
  }
#endif
  std::string host = world.master_addr;
  int port = world.master_port;
  auto store = mpirun ? OpenStoreOverMpi(world, timeout, host, port)
                      : OpenStore(host, port, world, /*wait_for_workers=*/true, timeout);
  if (backend == "gloo") {
    const GlooInterface interface = ChooseGlooInterface(host, ProcessEnvironment());
    result.communicator = MakeGlooCommunicator(store, world.rank, world.world_size, interface, timeout);
    result.description = fmt::format("gloo over a TCPStore at {}:{} ({})", host, port, interface.Describe());
    return result;
  }
#ifdef MGPU_WITH_NCCL
  std::string id;
  if (world.rank == 0) {
    id = NewNcclUniqueId();
    store->set("mgpu/nccl-unique-id", std::vector<uint8_t>(id.begin(), id.end()));
  } else {
    const std::vector<uint8_t> bytes = store->get("mgpu/nccl-unique-id");
    id.assign(bytes.begin(), bytes.end());
  }
  result.communicator = MakeNcclCommunicator(id, world.rank, world.world_size, device.index(), timeout, nccl);
  result.description = fmt::format("nccl on cuda:{}, unique id through the TCPStore at {}:{}", device.index(), host, port);
  return result;
#else
  throw BadInputError("this build of mgpu has no NCCL; use --backend gloo");
#endif
}

}  // namespace mgpu
