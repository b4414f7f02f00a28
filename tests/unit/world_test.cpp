// Specification of rank discovery: flags > torchrun environment > Open MPI environment >
// a single process, with the source recorded and bad values rejected by name.
#include <gtest/gtest.h>

#include <map>

#include "common/status.h"
#include "ddp/world.h"

namespace mgpu {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

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

}  // namespace
}  // namespace mgpu
