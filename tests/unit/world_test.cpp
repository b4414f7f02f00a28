// Specification of rank discovery: flags > torchrun environment > Open MPI environment > an srun
// step's environment > a single process, with the source recorded and bad values rejected by
// name; and the CUDA device a rank takes by default.
#include <gtest/gtest.h>

#include <map>

#include "common/status.h"
#include "ddp/slurm_environment.h"
#include "ddp/world.h"
#include "tests/support/test_support.h"

#include "tests/support/fake_environment.h"

namespace mgpu {
namespace {

using mgpu::testing::BadInputMessage;

using mgpu::testing::FakeEnv;

TEST(ResolveWorld, DefaultsToASingleProcess) {
  WorldInfo world = ResolveWorld(WorldFlags{}, FakeEnv({}));
  EXPECT_EQ(world.rank, 0);
  EXPECT_EQ(world.world_size, 1);
  EXPECT_NE(world.source.find("single process"), std::string::npos);
}

TEST(ResolveWorld, ReadsTorchrunEnvironment) {
  WorldInfo world = ResolveWorld(WorldFlags{}, FakeEnv({{"RANK", "3"}, {"WORLD_SIZE", "4"},
                                                        {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                                                        {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(world.rank, 3);
  EXPECT_EQ(world.world_size, 4);
  EXPECT_EQ(world.local_rank, 1);
  EXPECT_EQ(world.local_world_size, 2);
  EXPECT_EQ(world.master_addr, "10.0.0.1");
  EXPECT_EQ(world.master_port, 1234);
  EXPECT_NE(world.source.find("torchrun"), std::string::npos);
}

TEST(ResolveWorld, ReadsOpenMpiEnvironment) {
  WorldInfo world = ResolveWorld(WorldFlags{}, FakeEnv({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(world.rank, 1);
  EXPECT_EQ(world.world_size, 2);
  EXPECT_EQ(world.local_rank, 1);
  EXPECT_NE(world.source.find("Open MPI"), std::string::npos);
}

TEST(ResolveWorld, TorchrunWinsOverOpenMpiAndFlagsWinOverBoth) {
  auto env = FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(ResolveWorld(WorldFlags{}, env).rank, 0);
  WorldFlags flags;
  flags.rank = 1;
  WorldInfo world = ResolveWorld(flags, env);
  EXPECT_EQ(world.rank, 1);
  EXPECT_EQ(world.world_size, 2);
  EXPECT_NE(world.source.find("flags over torchrun"), std::string::npos);
}

TEST(ResolveWorld, MalformedOrInconsistentValuesAreNamed) {
  try {
    ResolveWorld(WorldFlags{}, FakeEnv({{"RANK", "zero"}, {"WORLD_SIZE", "2"}}));
    FAIL();
  } catch (const BadInputError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='zero'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ResolveWorld(WorldFlags{}, FakeEnv({{"RANK", "2"}, {"WORLD_SIZE", "2"}})), BadInputError);
  EXPECT_THROW(ResolveWorld(WorldFlags{}, FakeEnv({{"RANK", "0"}})), BadInputError);
  WorldFlags flags;
  flags.world_size = 0;
  EXPECT_THROW(ResolveWorld(flags, FakeEnv({})), BadInputError);
}

// What srun sets for task 3 of `srun -N2 --ntasks-per-node=4` in job 1234 (the variables the
// worker reads; a real task has more).
std::map<std::string, std::string> SrunTask() {
  return {{"SLURM_JOB_ID", "1234"},        {"SLURM_STEP_ID", "0"},          {"SLURM_PROCID", "6"},
          {"SLURM_NTASKS", "8"},           {"SLURM_LOCALID", "2"},          {"SLURM_NODEID", "1"},
          {"SLURM_NNODES", "2"},           {"SLURM_STEP_NUM_NODES", "2"},   {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
          {"SLURM_JOB_NODELIST", "gpu[07-08]"}, {"SLURM_STEP_NODELIST", "gpu[07-08]"}};
}

TEST(ResolveWorld, ReadsAnSrunStepTakingTheRankFromProcidNotNodeid) {
  WorldInfo world = ResolveWorld(WorldFlags{}, FakeEnv(SrunTask()));
  EXPECT_EQ(world.rank, 6) << "SLURM_PROCID, not SLURM_NODEID (1)";
  EXPECT_EQ(world.world_size, 8);
  EXPECT_EQ(world.local_rank, 2);
  EXPECT_EQ(world.local_world_size, 4);
  EXPECT_TRUE(world.from_slurm);
  EXPECT_EQ(world.master_addr, "gpu07") << "the first host of the step's node list, the same on every node";
  EXPECT_EQ(world.master_port, kSlurmPortBase + 1234) << "derived from SLURM_JOB_ID, the same on every node";
  EXPECT_EQ(world.source.rfind("Slurm environment (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID", 0), 0u) << world.source;
  EXPECT_NE(world.source.find("gpu07"), std::string::npos) << world.source;
}

TEST(ResolveWorld, SlurmsDerivedPortStaysInItsRangeAndTheStepsNodeListComesFirst) {
  auto vars = SrunTask();
  vars["SLURM_JOB_ID"] = "4294967295";  // job ids are 32-bit; federated ones use the high bits
  vars["SLURM_JOB_NODELIST"] = "login1,gpu[07-08]";
  WorldInfo world = ResolveWorld(WorldFlags{}, FakeEnv(vars));
  EXPECT_EQ(world.master_port, kSlurmPortBase + 4294967295u % kSlurmPortSpan);
  vars["SLURM_JOB_ID"] = "4294967296";
  EXPECT_NE(BadInputMessage([&] { ResolveWorld(WorldFlags{}, FakeEnv(vars)); }).find("SLURM_JOB_ID='4294967296'"),
            std::string::npos);
  vars["SLURM_JOB_ID"] = "4294967295";
  EXPECT_EQ(world.master_addr, "gpu07");
  vars.erase("SLURM_STEP_NODELIST");
  EXPECT_EQ(ResolveWorld(WorldFlags{}, FakeEnv(vars)).master_addr, "login1");
}

TEST(ResolveWorld, MasterAddrAndPortSetInTheJobScriptBeatSlurmsDerivedOnes) {
  auto vars = SrunTask();
  vars["MASTER_ADDR"] = "10.1.2.3";
  vars["MASTER_PORT"] = "31000";
  WorldInfo world = ResolveWorld(WorldFlags{}, FakeEnv(vars));
  EXPECT_EQ(world.rank, 6);
  EXPECT_EQ(world.master_addr, "10.1.2.3");
  EXPECT_EQ(world.master_port, 31000);
}

TEST(ResolveWorld, TorchrunAndOpenMpiWinOverSlurmAndFlagsWinOverAll) {
  auto vars = SrunTask();
  vars["RANK"] = "1";
  vars["WORLD_SIZE"] = "2";
  EXPECT_NE(ResolveWorld(WorldFlags{}, FakeEnv(vars)).source.find("torchrun"), std::string::npos)
      << "`mgpu run` under srun gives its workers torchrun's variables";
  auto mpi = SrunTask();
  mpi["OMPI_COMM_WORLD_RANK"] = "0";
  mpi["OMPI_COMM_WORLD_SIZE"] = "4";
  EXPECT_EQ(ResolveWorld(WorldFlags{}, FakeEnv(mpi)).world_size, 4);
  WorldFlags flags;
  flags.master_port = 29999;
  WorldInfo world = ResolveWorld(flags, FakeEnv(SrunTask()));
  EXPECT_EQ(world.rank, 6);
  EXPECT_EQ(world.master_port, 29999);
  EXPECT_EQ(world.source.rfind("flags over Slurm environment", 0), 0u) << world.source;
}

TEST(ResolveWorld, ABatchScriptWithoutSrunIsOneProcessSayingToUseSrun) {
  WorldInfo world = ResolveWorld(WorldFlags{}, FakeEnv({{"SLURM_JOB_ID", "12"}, {"SLURM_PROCID", "0"},
                                                        {"SLURM_NTASKS", "4"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}));
  EXPECT_EQ(world.world_size, 1) << "the batch step is one process, not the job's 4 tasks";
  EXPECT_FALSE(world.from_slurm);
  EXPECT_NE(world.source.find("srun"), std::string::npos) << world.source;
}

TEST(ResolveWorld, BrokenSlurmVariablesAreNamed) {
  auto vars = SrunTask();
  vars["SLURM_STEP_NODELIST"] = "gpu[07-08";
  const std::string message = BadInputMessage([&] { ResolveWorld(WorldFlags{}, FakeEnv(vars)); });
  EXPECT_NE(message.find("SLURM_STEP_NODELIST='gpu[07-08'"), std::string::npos) << message;
  EXPECT_NE(message.find("character 4"), std::string::npos) << message;
  vars = SrunTask();
  vars.erase("SLURM_PROCID");
  EXPECT_NE(BadInputMessage([&] { ResolveWorld(WorldFlags{}, FakeEnv(vars)); }).find("SLURM_PROCID"),
            std::string::npos);
  vars = SrunTask();
  vars["SLURM_LOCALID"] = "4";
  EXPECT_NE(BadInputMessage([&] { ResolveWorld(WorldFlags{}, FakeEnv(vars)); }).find("SLURM_LOCALID=4"),
            std::string::npos);
  vars = SrunTask();
  vars["SLURM_STEP_TASKS_PER_NODE"] = "4(2)";
  EXPECT_NE(BadInputMessage([&] { ResolveWorld(WorldFlags{}, FakeEnv(vars)); }).find("SLURM_STEP_TASKS_PER_NODE"),
            std::string::npos);
}

TEST(DefaultCudaIndex, IsTheLocalRankExceptForASlurmTaskBoundToOneGpu) {
  WorldInfo slurm = ResolveWorld(WorldFlags{}, FakeEnv(SrunTask()));
  EXPECT_EQ(DefaultCudaIndex(slurm, 1), 0) << "--gpus-per-task=1: the task's only GPU";
  EXPECT_EQ(DefaultCudaIndex(slurm, 4), 2) << "every GPU of the node visible: SLURM_LOCALID";
  WorldInfo torchrun = ResolveWorld(WorldFlags{}, FakeEnv({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}}));
  EXPECT_EQ(DefaultCudaIndex(torchrun, 1), 2) << "torchrun ranks index the visible GPUs (out of range is an error)";
}

}  // namespace
}  // namespace mgpu
