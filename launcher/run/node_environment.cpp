#include "launcher/run/node_environment.h"

#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/status.h"
#include "ddp/slurm_environment.h"

namespace mgpu {
namespace {

constexpr const char* kKubeflow = "Kubeflow (the torch runtime's PET_* variables)";

// PET_NNODES: "N", or torchrun's elastic "MIN:MAX", which mgpu accepts only as a fixed size.
int KubeflowNodeCount(const EnvLookup& env) {
  const std::string text = env("PET_NNODES");
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return *ReadEnvInt(env, "PET_NNODES", kKubeflow);
  const std::string low = text.substr(0, colon), high = text.substr(colon + 1);
  if (low != high || low.empty() || low.size() > 6 || low.find_first_not_of("0123456789") != std::string::npos) {
    throw BadInputError(fmt::format("PET_NNODES='{}': mgpu run needs a fixed number of nodes, not an elastic "
                                    "range; set the job's node count (numNodes, or elasticPolicy minReplicas = "
                                    "maxReplicas)",
                                    text));
  }
  return std::stoi(low);
}

// PET_NPROC_PER_NODE: a count, "auto" or "gpu" (mgpu's auto: the visible GPUs, else 2).
std::string KubeflowProcsPerNode(const char* value) {
  const std::string text = value;
  if (text == "auto" || text == "gpu") return "auto";
  if (text == "cpu") {
    throw BadInputError("PET_NPROC_PER_NODE=cpu (one worker per CPU core) is not supported by mgpu run: set "
                        "numProcPerNode to a number, or to auto (the node's GPUs, else 2 workers)");
  }
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(text) < 1 || std::stoi(text) > 1024) {
    throw BadInputError(fmt::format("PET_NPROC_PER_NODE='{}' (set by {}): expected a count from 1 to 1024, "
                                    "auto or gpu",
                                    text, kKubeflow));
  }
  return text;
}

NodeLayout FromKubeflow(const EnvLookup& env) {
  NodeLayout layout;
  std::vector<std::string> used;
  if (EnvIsSet(env, "PET_NNODES")) {
    layout.nnodes = KubeflowNodeCount(env);
    used.push_back("PET_NNODES");
  }
  if (EnvIsSet(env, "PET_NPROC_PER_NODE")) {
    layout.nproc_per_node = KubeflowProcsPerNode(env("PET_NPROC_PER_NODE"));
    used.push_back("PET_NPROC_PER_NODE");
  }
  if (auto rank = ReadEnvInt(env, "PET_NODE_RANK", kKubeflow)) {
    layout.node_rank = *rank;
    used.push_back("PET_NODE_RANK");
  }
  // PyTorchJob (training-operator v1) sets the master's address as MASTER_ADDR and MASTER_PORT only.
  for (const char* name : {"PET_MASTER_ADDR", "MASTER_ADDR"}) {
    if (!EnvIsSet(env, name)) continue;
    layout.master_addr = env(name);
    used.push_back(name);
    break;
  }
  for (const char* name : {"PET_MASTER_PORT", "MASTER_PORT"}) {
    const std::optional<int> port = ReadEnvInt(env, name, kKubeflow);
    if (!port) continue;
    if (*port < 1 || *port > 65535) {
      throw BadInputError(fmt::format("{}={} (set by {}) is not a TCP port (1-65535)", name, *port, kKubeflow));
    }
    layout.master_port = *port;
    used.push_back(name);
    break;
  }
  layout.source = fmt::format("Kubeflow environment ({})", fmt::join(used, ", "));
  return layout;
}

NodeLayout FromSlurm(const SlurmStep& step) {
  if (step.ntasks != step.nnodes) {
    throw BadInputError(fmt::format(
        "srun started {} tasks of `mgpu run` on {} node(s); mgpu run starts its node's workers itself, so run one "
        "task per node: `srun --ntasks-per-node=1 mgpu run ...` (or mgpu-worker under srun, one task per rank)",
        step.ntasks, step.nnodes));
  }
  NodeLayout layout;
  layout.nnodes = step.nnodes;
  layout.node_rank = step.nodeid;
  if (step.nnodes == 1) {
    // One node keeps the loopback defaults: nothing to reach across the network.
    layout.source = "Slurm environment (SLURM_NODEID 0 of 1 node)";
    return layout;
  }
  layout.master_addr = step.first_host;
  layout.master_port = step.port;
  layout.source = fmt::format("Slurm environment (SLURM_NODEID {} of {} nodes; master {} = first host of {}, port "
                              "{} from SLURM_JOB_ID {})",
                              step.nodeid, step.nnodes, step.first_host, step.nodelist_variable, step.port,
                              step.job_id);
  return layout;
}

}  // namespace

NodeLayout NodeLayoutFromEnvironment(const EnvLookup& env) {
  for (const char* name : {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}) {
    if (EnvIsSet(env, name)) return FromKubeflow(env);
  }
  if (const std::optional<SlurmStep> step = ReadSlurmStep(env)) return FromSlurm(*step);
  return NodeLayout{};
}

}  // namespace mgpu
