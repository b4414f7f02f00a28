// What an srun step tells each of its tasks, read once into a typed record: for mgpu-worker
// started by srun with one task per rank, and for `mgpu run` started by srun with one task per
// node.
//
// Only a task of an srun step counts (SLURM_STEP_ID set). A batch script itself also sees
// SLURM_PROCID=0 and the job's SLURM_NTASKS, but it is one process, not the job's ranks: a
// worker started there without srun would wait forever for ranks that never come.
//
// The rendezvous port is derived from the job id, so every node computes the same one without
// talking: kSlurmPortBase + SLURM_JOB_ID mod kSlurmPortSpan, 20000-29999, unprivileged and below
// Linux's ephemeral range (32768-60999), so no outgoing connection holds it; `mgpu run` uses it
// and the next port (its coordinator). Two steps of one job running at once need their own
// MASTER_PORT (workers) or --master-port (`mgpu run`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ddp/environment.h"

namespace mgpu {

inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortSpan = 10000;

struct SlurmStep {
  int procid = 0;          // SLURM_PROCID: the task's rank in the step
  int ntasks = 1;          // SLURM_NTASKS (srun sets it to the step's task count)
  int localid = 0;         // SLURM_LOCALID: the task's index among the step's tasks on its node
  int tasks_on_node = 1;   // this node's entry of SLURM_STEP_TASKS_PER_NODE ("2(x3),1")
  int nodeid = 0;          // SLURM_NODEID: the node's index in the step
  int nnodes = 1;          // SLURM_STEP_NUM_NODES, else SLURM_NNODES or SLURM_JOB_NUM_NODES
  std::string first_host;  // the first host of the step's node list: rank 0's node
  std::string nodelist_variable;  // the variable first_host came from
  uint32_t job_id = 0;     // SLURM_JOB_ID
  int port = 0;            // the rendezvous port derived from job_id
};

// nullopt outside an srun step. Throws BadInputError, naming the variable, for a malformed or
// missing value inside one.
std::optional<SlurmStep> ReadSlurmStep(const EnvLookup& env);

// Whether the process runs in a Slurm job but outside any srun step (a batch script).
bool InSlurmBatchScript(const EnvLookup& env);

}  // namespace mgpu
