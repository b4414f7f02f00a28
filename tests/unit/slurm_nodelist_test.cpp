// Specification of Slurm node-list expansion: the forms Slurm writes into SLURM_JOB_NODELIST,
// in Slurm's order (the same lists as `scontrol show hostnames`, which
// tests/integration/slurm_cluster_test.cpp checks against a real Slurm), and malformed lists
// rejected naming the variable and the character.
#include <gtest/gtest.h>

#include "common/status.h"
#include "ddp/slurm_nodelist.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using mgpu::testing::BadInputMessage;
using Hosts = std::vector<std::string>;

Hosts Expand(const std::string& list) { return ExpandSlurmNodelist(list, "SLURM_JOB_NODELIST"); }

TEST(SlurmNodelist, ASingleHostAndPlainListsStayAsTheyAre) {
  EXPECT_EQ(Expand("vm"), (Hosts{"vm"}));
  EXPECT_EQ(Expand("a,b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(Expand("node-1.cluster"), (Hosts{"node-1.cluster"}));
}

TEST(SlurmNodelist, RangesAndSinglesInBracketsKeepTheLowerBoundsZeroPadding) {
  EXPECT_EQ(Expand("gpu[01-04,07]"), (Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"}));
  EXPECT_EQ(Expand("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(Expand("n[008-011]"), (Hosts{"n008", "n009", "n010", "n011"}));
  EXPECT_EQ(Expand("n[099-101]"), (Hosts{"n099", "n100", "n101"}));
  EXPECT_EQ(Expand("n[1-02]"), (Hosts{"n1", "n2"})) << "the width is the lower bound's";
  EXPECT_EQ(Expand("n[007]"), (Hosts{"n007"}));
  EXPECT_EQ(Expand("[1-2]"), (Hosts{"1", "2"}));
}

TEST(SlurmNodelist, ItemsMixAndRepeatInTheirOrder) {
  EXPECT_EQ(Expand("a1,b[2-3]"), (Hosts{"a1", "b2", "b3"}));
  EXPECT_EQ(Expand("n[1-3,5],m"), (Hosts{"n1", "n2", "n3", "n5", "m"}));
  EXPECT_EQ(Expand("n[1-2],n[1-2]"), (Hosts{"n1", "n2", "n1", "n2"}));
  EXPECT_EQ(Expand("a b\tc"), (Hosts{"a", "b", "c"})) << "whitespace separates, as in Slurm";
  EXPECT_EQ(Expand("a,,b,"), (Hosts{"a", "b"})) << "empty items are skipped, as in Slurm";
}

TEST(SlurmNodelist, SeveralBracketGroupsExpandToEveryCombinationFirstGroupSlowest) {
  EXPECT_EQ(Expand("n[1-2]-ib[3-4]"), (Hosts{"n1-ib3", "n1-ib4", "n2-ib3", "n2-ib4"}));
  EXPECT_EQ(Expand("r[1-2][3-4]"), (Hosts{"r13", "r14", "r23", "r24"}));
  EXPECT_EQ(Expand("n[1-2]a[3,4]b[5-6]").front(), "n1a3b5");
}

TEST(SlurmNodelist, MalformedListsNameTheVariableAndTheCharacter) {
  const auto message = [](const std::string& list) { return BadInputMessage([&] { Expand(list); }); };
  EXPECT_NE(message("gpu[01-04").find("SLURM_JOB_NODELIST='gpu[01-04'"), std::string::npos);
  EXPECT_NE(message("gpu[01-04").find("at character 4"), std::string::npos) << message("gpu[01-04");
  EXPECT_NE(message("n[3-1]").find("runs backwards"), std::string::npos);
  EXPECT_NE(message("n[]").find("character 3"), std::string::npos) << message("n[]");
  EXPECT_NE(message("n[a-b]").find("expected a number"), std::string::npos);
  EXPECT_NE(message("n[1-]").find("character 5"), std::string::npos) << message("n[1-]");
  EXPECT_NE(message("n[1,,2]").find("character 5"), std::string::npos) << message("n[1,,2]");
  EXPECT_NE(message("n[1-2-3]").find("unexpected '-'"), std::string::npos) << message("n[1-2-3]");
  EXPECT_NE(message("n[1-2]b").find("after the last ']'"), std::string::npos) << message("n[1-2]b");
  EXPECT_NE(message("n]").find("without a matching '['"), std::string::npos);
  EXPECT_NE(message("n[[1]]").find("character 3"), std::string::npos) << message("n[[1]]");
  EXPECT_NE(message(" , ").find("names no host"), std::string::npos);
  EXPECT_NE(message("").find("names no host"), std::string::npos);
}

TEST(SlurmNodelist, HugeListsAreRefusedBeforeTheyExhaustMemory) {
  EXPECT_NE(BadInputMessage([] { Expand("n[0-999999999]"); }).find("more than"), std::string::npos);
  EXPECT_NE(BadInputMessage([] { Expand("n[0-9999][0-9999]"); }).find("more than"), std::string::npos);
  EXPECT_NE(BadInputMessage([] { Expand("n[0000000001-2]"); }).find("digits"), std::string::npos);
}

}  // namespace
}  // namespace mgpu
