#include "ddp/slurm_environment.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <vector>

#include <fmt/format.h>

#include "common/status.h"
#include "ddp/slurm_nodelist.h"

namespace mgpu {
namespace {

constexpr const char* kSrun = "srun";

int Required(const EnvLookup& env, const char* name) {
  if (std::optional<int> value = ReadEnvInt(env, name, kSrun)) return *value;
  throw BadInputError(fmt::format("SLURM_STEP_ID is set (this is a task of an srun step) but {} is not; Slurm sets "
                                  "both for every task: start the ranks with srun, or unset SLURM_STEP_ID",
                                  name));
}

// SLURM_JOB_ID: a 32-bit unsigned number (federated clusters put their id in the high bits),
// beyond ReadEnvInt's range.
uint32_t JobId(const EnvLookup& env) {
  const char* value = env("SLURM_JOB_ID");
  if (value == nullptr || *value == '\0') return static_cast<uint32_t>(Required(env, "SLURM_JOB_ID"));
  char* end = nullptr;
  errno = 0;
  const unsigned long long parsed = std::strtoull(value, &end, 10);
  if (errno != 0 || *end != '\0' || !std::isdigit(static_cast<unsigned char>(*value)) || parsed > UINT32_MAX) {
    throw BadInputError(fmt::format("environment variable SLURM_JOB_ID='{}' is not a Slurm job id (0 to {}); it is "
                                    "normally set by srun: unset it or fix its value",
                                    value, UINT32_MAX));
  }
  return static_cast<uint32_t>(parsed);
}

// The first of `names` that is set, or nullptr.
const char* FirstSet(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (EnvIsSet(env, name)) return name;
  }
  return nullptr;
}

// Slurm's compressed task counts, one per node: "2(x3),1" is 2, 2, 2, 1.
std::vector<int> ExpandTasksPerNode(const char* variable, const std::string& text) {
  std::vector<int> counts;
  const auto bad = [&](const std::string& what) {
    return BadInputError(fmt::format("{}='{}' is not Slurm's tasks-per-node list (like '2(x3),1'): {}; it is "
                                     "normally set by srun: unset it or fix its value",
                                     variable, text, what));
  };
  const char* p = text.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    errno = 0;
    const long count = std::strtol(p, &end, 10);
    if (end == p || errno != 0 || count < 0 || count > 1'000'000) throw bad("expected a task count");
    long repeat = 1;
    p = end;
    if (*p == '(') {
      if (p[1] != 'x') throw bad("expected '(xN)' after a count");
      repeat = std::strtol(p + 2, &end, 10);
      if (end == p + 2 || *end != ')' || repeat < 1 || repeat > 1'000'000) throw bad("expected '(xN)' after a count");
      p = end + 1;
    }
    if (counts.size() + static_cast<size_t>(repeat) > 1'000'000) throw bad("more than 1,000,000 nodes");
    counts.insert(counts.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    if (*p == ',') {
      ++p;
    } else if (*p != '\0') {
      throw bad(fmt::format("unexpected '{}'", *p));
    }
  }
  return counts;
}

int TasksOnNode(const EnvLookup& env, const SlurmStep& step) {
  const char* variable = FirstSet(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (variable == nullptr) return (step.ntasks + step.nnodes - 1) / step.nnodes;
  const std::vector<int> counts = ExpandTasksPerNode(variable, env(variable));
  if (static_cast<size_t>(step.nodeid) >= counts.size()) {
    throw BadInputError(fmt::format("{}='{}' lists {} node(s), but SLURM_NODEID is {}", variable, env(variable),
                                    counts.size(), step.nodeid));
  }
  return counts[static_cast<size_t>(step.nodeid)];
}

void CheckInRange(int value, const char* name, int bound, const std::string& bound_name) {
  if (value >= bound) {
    throw BadInputError(fmt::format("{}={} is out of range for {}={} (Slurm's variables disagree: were they set by "
                                    "hand, or copied from another step?)",
                                    name, value, bound_name, bound));
  }
}

}  // namespace

bool InSlurmBatchScript(const EnvLookup& env) { return EnvIsSet(env, "SLURM_JOB_ID") && !EnvIsSet(env, "SLURM_STEP_ID"); }

std::optional<SlurmStep> ReadSlurmStep(const EnvLookup& env) {
  if (!EnvIsSet(env, "SLURM_STEP_ID")) return std::nullopt;
  SlurmStep step;
  step.procid = Required(env, "SLURM_PROCID");
  step.ntasks = Required(env, "SLURM_NTASKS");
  step.localid = Required(env, "SLURM_LOCALID");
  step.nodeid = Required(env, "SLURM_NODEID");
  step.job_id = JobId(env);
  const char* nodes = FirstSet(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  step.nnodes = nodes == nullptr ? 1 : *ReadEnvInt(env, nodes, kSrun);
  const char* nodelist = FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (nodelist == nullptr) {
    throw BadInputError("SLURM_STEP_ID is set (this is a task of an srun step) but none of SLURM_STEP_NODELIST, "
                        "SLURM_JOB_NODELIST or SLURM_NODELIST is: start the ranks with srun");
  }
  step.nodelist_variable = nodelist;
  step.first_host = ExpandSlurmNodelist(env(nodelist), nodelist).front();
  if (step.ntasks < 1 || step.nnodes < 1) {
    throw BadInputError(fmt::format("SLURM_NTASKS={} and {}={} must both be at least 1", step.ntasks,
                                    nodes == nullptr ? "SLURM_NNODES" : nodes, step.nnodes));
  }
  CheckInRange(step.procid, "SLURM_PROCID", step.ntasks, "SLURM_NTASKS");
  CheckInRange(step.nodeid, "SLURM_NODEID", step.nnodes, nodes == nullptr ? "SLURM_NNODES" : nodes);
  step.tasks_on_node = TasksOnNode(env, step);
  CheckInRange(step.localid, "SLURM_LOCALID", step.tasks_on_node, "this node's tasks");
  step.port = kSlurmPortBase + static_cast<int>(step.job_id % kSlurmPortSpan);
  return step;
}

}  // namespace mgpu
