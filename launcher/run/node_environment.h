// Where `mgpu run` learns its node's place in the job when its flags leave it out:
//
//   Kubeflow (Trainer v2's torch runtime, training-operator's PyTorchJob) sets torchrun's
//   PET_* variables: PET_NNODES -> --nnodes, PET_NPROC_PER_NODE -> --nproc-per-node,
//   PET_NODE_RANK -> --node-rank, PET_MASTER_ADDR -> --master-addr, PET_MASTER_PORT ->
//   --master-port; where PET_MASTER_ADDR and PET_MASTER_PORT are unset (PyTorchJob sets
//   MASTER_ADDR and MASTER_PORT instead), MASTER_ADDR and MASTER_PORT.
//   Slurm, in a task of an srun step with one task per node (ddp/slurm_environment.h):
//   SLURM_NODEID -> --node-rank, the step's node count -> --nnodes and, across several nodes,
//   the first host of the step's node list -> --master-addr and the port derived from
//   SLURM_JOB_ID -> --master-port.
//
// Kubeflow's variables win over Slurm's (a pod under Slurm is not a thing); flags win over both.
#pragma once

#include <optional>
#include <string>

#include "ddp/environment.h"

namespace mgpu {

struct NodeLayout {
  std::optional<int> nnodes;
  std::optional<int> node_rank;
  std::optional<std::string> nproc_per_node;  // a count, or "auto"
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::string source;  // for the start-up log; "" when no environment applies
};

// Throws BadInputError naming the variable for a malformed value, an elastic node range
// ("1:4"), PET_NPROC_PER_NODE=cpu, or an srun step with more than one task per node.
NodeLayout NodeLayoutFromEnvironment(const EnvLookup& env);

}  // namespace mgpu
