// Specification of where `mgpu run` takes its node layout from when flags leave it out:
// Kubeflow's PET_* variables (Trainer v2's torch runtime, PyTorchJob), else an srun step with
// one task per node; flags win over both, and the start-up log names the source.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "common/status.h"
#include "ddp/slurm_environment.h"
#include "launcher/run/run_options.h"
#include "tests/support/test_support.h"

#include "tests/support/fake_environment.h"

namespace mgpu {
namespace {

using mgpu::testing::BadInputMessage;
using Vars = std::map<std::string, std::string>;

using mgpu::testing::FakeEnv;

RunOptions Parse(std::vector<std::string> args, const Vars& vars) {
  std::optional<RunOptions> options = ParseRunOptions(args, FakeEnv(vars));
  EXPECT_TRUE(options.has_value());
  return options.value_or(RunOptions{});
}

// What Kubeflow Trainer v2's torch runtime sets on node 1 of TrainJob "lenet" (numNodes: 2),
// plus the token the manifest takes from a Secret.
Vars TrainJobNode1() {
  return {{"PET_NNODES", "2"},          {"PET_NPROC_PER_NODE", "auto"},
          {"PET_NODE_RANK", "1"},       {"PET_MASTER_ADDR", "lenet-node-0-0.lenet"},
          {"PET_MASTER_PORT", "29400"}, {"MGPU_TOKEN", "from-a-secret"}};
}

TEST(NodeEnvironment, KubeflowsPetVariablesFillTheLayoutFlags) {
  Vars vars = TrainJobNode1();
  vars["PET_NPROC_PER_NODE"] = "4";
  const RunOptions options = Parse({"--mode", "ddp"}, vars);
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.node_rank, 1);
  EXPECT_EQ(options.nproc_per_node, "4");
  EXPECT_EQ(options.master_addr, "lenet-node-0-0.lenet");
  EXPECT_EQ(options.master_port, 29400);
  EXPECT_EQ(options.layout_source,
            "Kubeflow environment (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT)");
  EXPECT_EQ(options.worker_args, (std::vector<std::string>{"--mode", "ddp"}));
}

TEST(NodeEnvironment, FlagsWinOverKubeflowAndTheSourceSaysSo) {
  const RunOptions options = Parse({"--node-rank", "0", "--master-port=29700", "--nproc_per_node", "2"}, TrainJobNode1());
  EXPECT_EQ(options.node_rank, 0);
  EXPECT_EQ(options.master_port, 29700);
  EXPECT_EQ(options.nproc_per_node, "2");
  EXPECT_EQ(options.nnodes, 2) << "the fields no flag set still come from the environment";
  EXPECT_EQ(options.master_addr, "lenet-node-0-0.lenet");
  EXPECT_EQ(options.layout_source.rfind("flags over Kubeflow environment", 0), 0u) << options.layout_source;
}

TEST(NodeEnvironment, KubeflowsAutoAndGpuMeanMgpusAutoAndAFixedElasticRangeIsASize) {
  Vars vars = TrainJobNode1();
  vars["PET_NPROC_PER_NODE"] = "gpu";
  vars["PET_NNODES"] = "2:2";
  const RunOptions options = Parse({}, vars);
  EXPECT_EQ(options.nproc_per_node, "auto");
  EXPECT_EQ(options.nnodes, 2);
}

TEST(NodeEnvironment, KubeflowValuesMgpuCannotHonourAreBadInputsNamingTheVariable) {
  const auto message = [](const std::string& name, const std::string& value) {
    Vars vars = TrainJobNode1();
    vars[name] = value;
    return BadInputMessage([&] { ParseRunOptions({}, FakeEnv(vars)); });
  };
  EXPECT_NE(message("PET_NNODES", "1:4").find("elastic"), std::string::npos);
  EXPECT_NE(message("PET_NPROC_PER_NODE", "cpu").find("PET_NPROC_PER_NODE=cpu"), std::string::npos);
  EXPECT_NE(message("PET_NPROC_PER_NODE", "0").find("PET_NPROC_PER_NODE='0'"), std::string::npos);
  EXPECT_NE(message("PET_MASTER_PORT", "70000").find("PET_MASTER_PORT=70000"), std::string::npos);
  EXPECT_NE(message("PET_NODE_RANK", "one").find("PET_NODE_RANK='one'"), std::string::npos);
  EXPECT_NE(message("PET_NODE_RANK", "2").find("Kubeflow environment"), std::string::npos)
      << "an out-of-range node rank says where it came from";
  EXPECT_NE(message("MGPU_TOKEN", "").find("--token"), std::string::npos)
      << "a pod's master address is not loopback: the token is still required";
}

TEST(NodeEnvironment, APyTorchJobsMasterAddrAndPortStandInForTheMissingPetOnes) {
  // training-operator v1 on worker 0 of PyTorchJob "lenet" (Master + 1 Worker, nprocPerNode auto).
  const RunOptions options = Parse({}, {{"PET_NNODES", "2"}, {"PET_NPROC_PER_NODE", "auto"}, {"PET_NODE_RANK", "1"},
                                        {"MASTER_ADDR", "lenet-master-0"}, {"MASTER_PORT", "23456"},
                                        {"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MGPU_TOKEN", "from-a-secret"}});
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.node_rank, 1);
  EXPECT_EQ(options.master_addr, "lenet-master-0");
  EXPECT_EQ(options.master_port, 23456);
  EXPECT_EQ(options.layout_source,
            "Kubeflow environment (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, MASTER_ADDR, MASTER_PORT)");
}

// Node 1's `mgpu run` task of `srun -N2 --ntasks-per-node=1` in job 4321.
Vars SrunNodeTask() {
  return {{"SLURM_JOB_ID", "4321"},       {"SLURM_STEP_ID", "0"},        {"SLURM_PROCID", "1"},
          {"SLURM_NTASKS", "2"},          {"SLURM_LOCALID", "0"},        {"SLURM_NODEID", "1"},
          {"SLURM_STEP_NUM_NODES", "2"},  {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
          {"SLURM_STEP_NODELIST", "gpu[1-2]"}, {"MGPU_TOKEN", "exported-in-the-job-script"}};
}

TEST(NodeEnvironment, AnSrunStepWithOneTaskPerNodeGivesNodeRankNodesMasterAndPort) {
  const RunOptions options = Parse({"--mode", "ddp"}, SrunNodeTask());
  EXPECT_EQ(options.nnodes, 2);
  EXPECT_EQ(options.node_rank, 1) << "SLURM_NODEID";
  EXPECT_EQ(options.master_addr, "gpu1");
  EXPECT_EQ(options.master_port, kSlurmPortBase + 4321) << "the same on every node";
  EXPECT_EQ(options.nproc_per_node, "auto");
  EXPECT_EQ(options.layout_source.rfind("Slurm environment (SLURM_NODEID 1 of 2 nodes", 0), 0u)
      << options.layout_source;
}

TEST(NodeEnvironment, OneSlurmNodeKeepsLoopbackAndNeedsNoToken) {
  const RunOptions options = Parse({}, {{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"},
                                        {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"},
                                        {"SLURM_STEP_NUM_NODES", "1"}, {"SLURM_STEP_NODELIST", "vm"}});
  EXPECT_EQ(options.nnodes, 1);
  EXPECT_EQ(options.master_addr, "127.0.0.1");
  EXPECT_EQ(options.master_port, -1) << "a free port, as without Slurm";
}

TEST(NodeEnvironment, SeveralMgpuRunTasksOnOneNodeAreABadInputSayingOnePerNode) {
  Vars vars = SrunNodeTask();
  vars["SLURM_NTASKS"] = "8";
  vars["SLURM_STEP_TASKS_PER_NODE"] = "4(x2)";
  const std::string message = BadInputMessage([&] { ParseRunOptions({}, FakeEnv(vars)); });
  EXPECT_NE(message.find("--ntasks-per-node=1"), std::string::npos) << message;
}

TEST(NodeEnvironment, KubeflowWinsOverSlurmAndNoEnvironmentLeavesTheDefaults) {
  Vars both = SrunNodeTask();
  for (const auto& [name, value] : TrainJobNode1()) both[name] = value;
  EXPECT_EQ(Parse({}, both).master_addr, "lenet-node-0-0.lenet");
  const RunOptions plain = Parse({"--nnodes", "1"}, {});
  EXPECT_EQ(plain.layout_source, "");
  EXPECT_EQ(plain.master_addr, "127.0.0.1");
  const RunOptions batch_script = Parse({}, {{"SLURM_JOB_ID", "7"}, {"SLURM_NNODES", "2"}, {"SLURM_NODEID", "0"}});
  EXPECT_EQ(batch_script.nnodes, 1) << "a batch script without srun is not a step: one node";
}

}  // namespace
}  // namespace mgpu
