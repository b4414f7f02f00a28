// docker/Dockerfile, docker/compose.yaml and .dockerignore, checked for what can be checked
// without a Docker engine: the Dockerfile sets up with the README's script and the Makefile's
// commands on Debian 12 (nothing from NVIDIA's apt repository) and ends in a slim stage holding
// mgpu and mgpu-worker, collected by scripts/collect_runtime.sh, with Open MPI's run-as-root
// switches; the compose file parses, names only paths that exist, and runs a 2-node job whose
// command lines mgpu itself accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/files.h"
#include "config/command_line.h"
#include "launcher/run/run_options.h"
#include "tests/support/test_support.h"

namespace mgpu {
namespace {

using namespace mgpu::testing;

const std::string kRoot = MGPU_SOURCE_DIR;

struct Instruction {
  std::string keyword;  // upper case: FROM, RUN, COPY, ENV, ...
  std::string args;     // continuation lines joined with single spaces
};

struct Stage {
  std::string base;  // FROM's image
  std::string name;  // AS name, or ""
  std::vector<Instruction> instructions;
};

// The Dockerfile's stages: comments dropped, `\` continuations joined, ARG defaults substituted
// into FROM lines (the global ARGs before the first FROM).
std::vector<Stage> ParseDockerfile(const std::string& text) {
  std::vector<Instruction> instructions;
  std::istringstream lines(text);
  std::string line, pending;
  while (std::getline(lines, line)) {
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    const bool continues = !line.empty() && line.back() == '\\';
    if (continues) line.pop_back();
    pending += (pending.empty() ? "" : " ") + line;
    if (continues) continue;
    const size_t space = pending.find_first_of(" \t");
    Instruction instruction{pending.substr(0, space), space == std::string::npos ? "" : pending.substr(space + 1)};
    std::transform(instruction.keyword.begin(), instruction.keyword.end(), instruction.keyword.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    instructions.push_back(instruction);
    pending.clear();
  }
  std::map<std::string, std::string> args;
  std::vector<Stage> stages;
  for (const Instruction& instruction : instructions) {
    if (instruction.keyword == "ARG" && stages.empty()) {
      const size_t equals = instruction.args.find('=');
      if (equals != std::string::npos) args[instruction.args.substr(0, equals)] = instruction.args.substr(equals + 1);
    } else if (instruction.keyword == "FROM") {
      std::smatch match;
      std::regex_match(instruction.args, match, std::regex(R"((\S+)(?:\s+AS\s+(\S+))?)", std::regex::icase));
      std::string base = match[1];
      for (const auto& [name, value] : args) base = std::regex_replace(base, std::regex("\\$\\{" + name + "\\}"), value);
      stages.push_back(Stage{base, match[2], {}});
    } else if (!stages.empty()) {
      stages.back().instructions.push_back(instruction);
    }
  }
  return stages;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The index of the first instruction of `stage` with `keyword` whose arguments contain `part`,
// or -1.
int Find(const Stage& stage, const std::string& keyword, const std::string& part) {
  for (size_t i = 0; i < stage.instructions.size(); ++i) {
    if (stage.instructions[i].keyword == keyword && Contains(stage.instructions[i].args, part)) return static_cast<int>(i);
  }
  return -1;
}

// A Makefile variable's value (`NAME ?= v`, `NAME := v`, `NAME = v`).
std::string MakeVariable(const std::string& makefile, const std::string& name) {
  std::smatch match;
  if (!std::regex_search(makefile, match, std::regex("(^|\\n)" + name + R"(\s*[:?]?=\s*([^\n]*))"))) return "";
  return match[2];
}

// The recipe line of `target:` in the Makefile (the first command after it).
std::string MakeRecipe(const std::string& makefile, const std::string& target) {
  std::smatch match;
  if (!std::regex_search(makefile, match, std::regex("(^|\\n)" + std::regex_replace(target, std::regex(R"([$()])"), R"(\$&)") +
                                                     R"(:[^\n]*\n\t([^\n]*))"))) {
    return "";
  }
  return match[2];
}

class DockerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    stages_ = ParseDockerfile(ReadText(kRoot + "/docker/Dockerfile"));
    ASSERT_GE(stages_.size(), 2u) << "a build stage and a runtime stage";
  }
  const Stage& Final() const { return stages_.back(); }
  // The stage that runs `make build`.
  const Stage* BuildStage() const {
    for (const Stage& stage : stages_) {
      if (Find(stage, "RUN", "make build") >= 0) return &stage;
    }
    return nullptr;
  }
  std::vector<Stage> stages_;
};

TEST_F(DockerFiles, TheBuildStageSetsUpWithTheReadmesScriptAndBuildsWithTheMakefile) {
  const std::string readme = ReadText(kRoot + "/README.md");
  ASSERT_TRUE(Contains(readme, "scripts/setup.sh")) << "the README's set-up step is scripts/setup.sh";
  const Stage* build = BuildStage();
  ASSERT_NE(build, nullptr) << "a stage must RUN `make build`, the README's build command";
  EXPECT_EQ(build->base, "debian:bookworm") << "scripts/setup.sh's package names are Debian 12's";
  for (const Stage& stage : stages_) {
    for (const Instruction& instruction : stage.instructions) {
      EXPECT_FALSE(Contains(instruction.args, "nvidia.com") || Contains(instruction.args, "cuda-keyring"))
          << "CUDA, cuDNN and NCCL come from the torch wheel (PyPI), not NVIDIA's apt repository: " << instruction.args;
    }
  }

  // The Makefile's deps recipe, with its variables expanded, is what the image runs.
  const std::string makefile = ReadText(kRoot + "/Makefile");
  const std::string build_dir = MakeVariable(makefile, "BUILD_DIR");
  std::string env_file = MakeVariable(makefile, "ENV_FILE");
  env_file = std::regex_replace(env_file, std::regex(R"(\$\(BUILD_DIR\))"), build_dir);
  std::string deps = MakeRecipe(makefile, "$(ENV_FILE)");
  ASSERT_FALSE(deps.empty()) << "the Makefile's set-up rule `$(ENV_FILE): scripts/setup.sh`";
  deps = std::regex_replace(deps, std::regex(R"(\$\(ENV_FILE\))"), env_file);
  ASSERT_EQ(deps, "bash scripts/setup.sh build/.setup.env");

  const int copied = Find(*build, "COPY", "scripts/setup.sh");
  const int set_up = Find(*build, "RUN", deps);
  const int built = Find(*build, "RUN", "make build");
  EXPECT_GE(copied, 0) << "the build stage must COPY scripts/setup.sh";
  EXPECT_GE(set_up, 0) << "the build stage must RUN `" << deps << "` (the Makefile's deps step)";
  EXPECT_LT(copied, set_up);
  EXPECT_LT(set_up, built) << "set up before building";
  for (const Instruction& instruction : build->instructions) {
    EXPECT_FALSE(instruction.keyword == "RUN" && Contains(instruction.args, "libgrpc"))
        << "Debian packages come from scripts/setup.sh, not a list of the Dockerfile's own: " << instruction.args;
  }
}

// The build stage is plain Debian 12: no CUDA toolkit, which LibTorch's CMake config of the CUDA
// torch wheel needs (enable_language(CUDA): nvcc and its NVVM). scripts/setup.sh makes one from
// PyPI wheels and names it in the set-up file; the Makefile's configure step hands it to CMake.
TEST(SetUpScript, MakesACudaToolkitFromPypiWheelsThatTheConfigureStepHandsToCMake) {
  const std::string setup = ReadText(kRoot + "/scripts/setup.sh");
  for (const char* wheel : {"nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-cccl"}) {
    EXPECT_TRUE(Contains(setup, wheel)) << "scripts/setup.sh must install " << wheel << " where no toolkit is found";
  }
  EXPECT_TRUE(std::regex_search(setup, std::regex(R"(\nCUDA_TOOLKIT_ROOT=\$\S+\n)")))
      << "scripts/setup.sh must write CUDA_TOOLKIT_ROOT=... into the set-up file";

  // The configure rule's whole recipe (its lines up to the next blank line).
  const std::string makefile = ReadText(kRoot + "/Makefile");
  const size_t rule = makefile.find("\n$(BUILD_DIR)/build.ninja:");
  ASSERT_NE(rule, std::string::npos) << "the Makefile's configure rule `$(BUILD_DIR)/build.ninja:`";
  const std::string recipe = makefile.substr(rule, makefile.find("\n\n", rule) - rule);
  for (const char* flag : {"-DCUDAToolkit_ROOT=\"$$CUDA_TOOLKIT_ROOT\"", "-DCUDA_TOOLKIT_ROOT_DIR=\"$$CUDA_TOOLKIT_ROOT\"",
                           "-DCMAKE_CUDA_COMPILER=\"$$CUDA_TOOLKIT_ROOT/bin/nvcc\""}) {
    EXPECT_TRUE(Contains(recipe, flag)) << "the configure recipe must pass " << flag << ":\n" << recipe;
  }
  EXPECT_TRUE(Contains(recipe, "$${CUDA_TOOLKIT_ROOT:+"))
      << "only where set-up made a toolkit: a machine's own is found by CMake as before";
}

TEST_F(DockerFiles, TheFinalStageIsSlimAndHoldsBothBinariesWithOpenMpisRootSwitches) {
  const Stage& final_stage = Final();
  EXPECT_TRUE(Contains(final_stage.base, "slim") || Contains(final_stage.base, "runtime")) << final_stage.base;
  EXPECT_EQ(Find(final_stage, "RUN", "make build"), -1) << "the runtime stage builds nothing";
  EXPECT_EQ(Find(final_stage, "RUN", "build-essential"), -1) << "the runtime stage has no compiler";

  // The build stage collects the binaries and their libraries into a folder
  // (scripts/collect_runtime.sh, which the runtime-only build runs on the host too); the final
  // stage copies it, through the stage MGPU_BINARIES picks (the build stage by default), and puts
  // its bin/ on PATH.
  const Stage* build = BuildStage();
  ASSERT_NE(build, nullptr);
  std::smatch match;
  std::string collected;
  for (const Instruction& instruction : build->instructions) {
    if (std::regex_search(instruction.args, match, std::regex(R"(scripts/collect_runtime\.sh build (\S+?)/?(\s|$))"))) {
      collected = match[1];
    }
  }
  ASSERT_FALSE(collected.empty()) << "the build stage must run scripts/collect_runtime.sh on its build tree";
  std::set<std::string> from_build = {build->name};  // stages that are the build stage under another name
  for (const Stage& stage : stages_) {
    if (from_build.count(stage.base) && !stage.name.empty()) from_build.insert(stage.name);
  }
  bool copied = false;
  for (const Instruction& instruction : final_stage.instructions) {
    if (instruction.keyword != "COPY" ||
        !std::regex_search(instruction.args, match, std::regex(R"(--from=(\S+)\s+(\S+)\s+\S+)"))) {
      continue;
    }
    if (from_build.count(match[1]) && collected.rfind(match[2], 0) == 0) copied = true;
  }
  EXPECT_TRUE(copied) << "the final stage must COPY --from=" << build->name << " (or an alias) " << collected;
  EXPECT_GE(Find(final_stage, "ENV", "PATH=" + collected + "/bin"), 0) << "mgpu and mgpu-worker on PATH";
  EXPECT_GE(Find(final_stage, "ENV", "OMPI_ALLOW_RUN_AS_ROOT=1"), 0);
  EXPECT_GE(Find(final_stage, "ENV", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"), 0);
  EXPECT_GE(Find(final_stage, "RUN", "openmpi-bin"), 0) << "mpirun in the image";
}

TEST_F(DockerFiles, DockerignoreLeavesOutBuildTreesRunsAndGit) {
  std::set<std::string> ignored;
  std::istringstream lines(ReadText(kRoot + "/.dockerignore"));
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] != '#') ignored.insert(line);
  }
  for (const char* entry : {".git", "build", "build-*", "runs", ".devdeps"}) EXPECT_TRUE(ignored.count(entry)) << entry;
}

// The compose file's services with YAML merge keys (`<<: *node`) resolved: yaml-cpp keeps `<<`
// as an ordinary key.
YAML::Node Resolved(const YAML::Node& service) {
  YAML::Node merged(YAML::NodeType::Map);
  if (service["<<"]) {
    for (const auto& entry : service["<<"]) merged[entry.first.as<std::string>()] = entry.second;
  }
  for (const auto& entry : service) {
    if (entry.first.as<std::string>() != "<<") merged[entry.first.as<std::string>()] = entry.second;
  }
  return merged;
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

TEST(ComposeFile, ParsesAndNamesOnlyPathsThatExist) {
  const std::string folder = kRoot + "/docker";
  const YAML::Node compose = YAML::LoadFile(folder + "/compose.yaml");
  const YAML::Node services = compose["services"];
  ASSERT_TRUE(services && services.IsMap());
  ASSERT_EQ(services.size(), 2u) << "two nodes";
  for (const auto& entry : services) {
    const std::string name = entry.first.as<std::string>();
    const YAML::Node service = Resolved(entry.second);
    const std::string context = folder + "/" + service["build"]["context"].as<std::string>();
    EXPECT_TRUE(IsDirectory(context)) << name << ": build context " << context;
    EXPECT_TRUE(IsRegularFile(context + "/" + service["build"]["dockerfile"].as<std::string>())) << name;
    EXPECT_TRUE(IsRegularFile(context + "/.dockerignore")) << "the build context's .dockerignore";
    for (const auto& volume : service["volumes"]) {
      const std::string source = volume.as<std::string>().substr(0, volume.as<std::string>().find(':'));
      if (source[0] == '.' || source[0] == '/') {
        EXPECT_TRUE(PathExists(folder + "/" + source)) << name << ": volume source " << source;
      } else {
        EXPECT_TRUE(compose["volumes"] && compose["volumes"][source]) << name << ": named volume " << source;
      }
    }
  }
}

TEST(ComposeFile, RunsOneMgpuNodePerServiceWithGpusSharedMemoryAndACommandMgpuAccepts) {
  const std::string folder = kRoot + "/docker";
  const YAML::Node compose = YAML::LoadFile(folder + "/compose.yaml");
  std::set<int> node_ranks;
  std::set<std::string> names;
  for (const auto& entry : compose["services"]) names.insert(entry.first.as<std::string>());
  for (const auto& entry : compose["services"]) {
    const std::string name = entry.first.as<std::string>();
    const YAML::Node service = Resolved(entry.second);
    ASSERT_TRUE(service["shm_size"]) << name << ": NCCL needs more than Docker's 64 MB of /dev/shm";
    const std::string shm = service["shm_size"].as<std::string>();
    EXPECT_TRUE(std::regex_match(shm, std::regex(R"(\d+(gb|g|GB|G))"))) << name << ": shm_size " << shm << " (>= 1 GB)";
    const YAML::Node devices = service["deploy"]["resources"]["reservations"]["devices"];
    ASSERT_TRUE(devices && devices.size() == 1) << name << ": one GPU reservation";
    EXPECT_EQ(devices[0]["driver"].as<std::string>(), "nvidia") << name;
    EXPECT_EQ(devices[0]["capabilities"][0].as<std::string>(), "gpu") << name;

    // The command, with container paths of bind mounts mapped back to the repository, is one
    // that `mgpu run` and the worker accept.
    std::vector<std::string> words = Words(service["command"].as<std::string>());
    ASSERT_GE(words.size(), 2u);
    ASSERT_EQ(words[0], "mgpu");
    ASSERT_EQ(words[1], "run");
    std::vector<std::string> args(words.begin() + 2, words.end());
    for (const auto& volume : service["volumes"]) {
      const std::string spec = volume.as<std::string>();
      const std::string source = spec.substr(0, spec.find(':'));
      std::string target = spec.substr(spec.find(':') + 1);
      target = target.substr(0, target.find(':'));
      if (source[0] != '.') continue;
      for (auto& arg : args) {
        if (arg.rfind(target + "/", 0) == 0) arg = folder + "/" + source + arg.substr(target.size());
      }
    }
    const auto options = ParseRunOptions(args, [](const char* variable) -> const char* {
      return std::string(variable) == "MGPU_TOKEN" ? "compose-test-token" : nullptr;
    });
    ASSERT_TRUE(options) << name;
    EXPECT_EQ(options->nnodes, 2) << name;
    EXPECT_EQ(options->nproc_per_node, "1") << name;
    EXPECT_TRUE(names.count(options->master_addr)) << name << ": --master-addr must name a service, not "
                                                   << options->master_addr;
    node_ranks.insert(options->node_rank);
    int help = 0;
    const auto config = ParseWorkerCommandLine(options->worker_args, help);
    ASSERT_TRUE(config) << name;
    EXPECT_EQ(config->mode, Mode::kDdp) << name;
    EXPECT_EQ(config->model, "lenet") << name;
    EXPECT_EQ(config->device, "cuda") << name;
    EXPECT_EQ(config->out.rfind("/runs/", 0), 0u) << name << ": output on the shared volume";
  }
  EXPECT_EQ(node_ranks, (std::set<int>{0, 1}));
}

// The image runs mpirun as root with Open MPI's variables set; a reader copying the mpirun line of
// docs/MULTI_GPU.md's DDP section (moved there from the README) as root needs to be told, or Open
// MPI refuses to start.
TEST(DdpGuideSection, SaysHowMpirunRunsAsRoot) {
  const std::string guide = ReadText(kRoot + "/docs/MULTI_GPU.md");
  const size_t start = guide.find("\n## Distributed data parallel (DDP)");
  ASSERT_NE(start, std::string::npos) << "docs/MULTI_GPU.md has a DDP section";
  const std::string section = guide.substr(start, guide.find("\n## ", start + 1) - start);
  EXPECT_TRUE(Contains(section, "mpirun -np 2")) << "the section shows an mpirun line";
  EXPECT_TRUE(Contains(section, "--allow-run-as-root")) << section;
  EXPECT_TRUE(Contains(section, "OMPI_ALLOW_RUN_AS_ROOT=1")) << section;
}

}  // namespace
}  // namespace mgpu
