// docker/kubernetes/'s manifests, checked without a cluster: each parses, has the fields its
// operator needs (Kubeflow Trainer v2's TrainJob on the torch-distributed runtime, training-
// operator v1's PyTorchJob), runs `mgpu run` from the image, takes the token from a Secret, and,
// given the environment the operator sets in each pod, makes `mgpu run` and the worker accept
// the command line with every node in its place.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <regex>
#include <set>

#include <yaml-cpp/yaml.h>

#include "config/command_line.h"
#include "launcher/run/run_options.h"

#include "tests/support/fake_environment.h"

namespace mgpu {
namespace {

const std::string kFolder = std::string(MGPU_SOURCE_DIR) + "/docker/kubernetes";

using Vars = std::map<std::string, std::string>;

using mgpu::testing::FakeEnv;

std::vector<std::string> Strings(const YAML::Node& list) {
  std::vector<std::string> strings;
  for (const auto& item : list) strings.push_back(item.as<std::string>());
  return strings;
}

// The container's env list: MGPU_TOKEN must come from a Secret, and no PET_* may be set by hand
// (Trainer rejects them; they are the operator's).
void ExpectTokenFromASecretAndNoPetVariables(const YAML::Node& env, const std::string& where) {
  bool token = false;
  for (const auto& variable : env) {
    const std::string name = variable["name"].as<std::string>();
    EXPECT_NE(name.rfind("PET_", 0), 0u) << where << ": " << name << " is the operator's to set";
    if (name == "MGPU_TOKEN") {
      token = true;
      EXPECT_TRUE(variable["valueFrom"]["secretKeyRef"]["name"]) << where << ": the token belongs in a Secret";
      EXPECT_FALSE(variable["value"]) << where << ": no secret in the manifest";
    }
  }
  EXPECT_TRUE(token) << where << ": the nodes' coordinator needs MGPU_TOKEN";
}

// `mgpu run` ARGS in a pod whose operator set `vars`: the options it runs with.
RunOptions ParseInPod(const std::vector<std::string>& command, const std::vector<std::string>& args, Vars vars) {
  EXPECT_EQ(command, (std::vector<std::string>{"mgpu", "run"})) << "the image's mgpu, as the container command";
  vars["MGPU_TOKEN"] = "from-the-secret";
  std::optional<RunOptions> options = ParseRunOptions(args, FakeEnv(vars));
  EXPECT_TRUE(options);
  if (!options) return RunOptions{};
  int help = 0;
  const auto config = ParseWorkerCommandLine(options->worker_args, help);
  EXPECT_TRUE(config);
  if (config) {
    EXPECT_EQ(config->mode, Mode::kDdp);
    EXPECT_EQ(config->device, "cuda");
    EXPECT_EQ(config->model, "lenet");
  }
  return *options;
}

TEST(KubernetesFiles, TheTrainJobRunsMgpuRunOnTheTorchRuntimeWithEveryNodeInPlace) {
  const YAML::Node job = YAML::LoadFile(kFolder + "/trainjob.yaml");
  EXPECT_EQ(job["apiVersion"].as<std::string>(), "trainer.kubeflow.org/v1alpha1");
  EXPECT_EQ(job["kind"].as<std::string>(), "TrainJob");
  const std::string name = job["metadata"]["name"].as<std::string>();
  EXPECT_TRUE(std::regex_match(name, std::regex("[a-z]([-a-z0-9]*[a-z0-9])?")) && name.size() <= 63)
      << "Trainer requires an RFC 1035 label: " << name;
  EXPECT_EQ(job["spec"]["runtimeRef"]["name"].as<std::string>(), "torch-distributed");
  const YAML::Node trainer = job["spec"]["trainer"];
  EXPECT_FALSE(trainer["image"].as<std::string>().empty());
  EXPECT_TRUE(trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"]) << "one GPU per node";
  ExpectTokenFromASecretAndNoPetVariables(trainer["env"], "trainjob.yaml");
  const int nodes = trainer["numNodes"].as<int>();
  ASSERT_GE(nodes, 2);
  for (int node = 0; node < nodes; ++node) {
    // What the torch runtime sets (kubeflow/trainer, pkg/runtime/framework/plugins/torch).
    const RunOptions options = ParseInPod(Strings(trainer["command"]), Strings(trainer["args"]),
                                          {{"PET_NNODES", std::to_string(nodes)},
                                           {"PET_NPROC_PER_NODE", "auto"},
                                           {"PET_NODE_RANK", std::to_string(node)},
                                           {"PET_MASTER_ADDR", name + "-node-0-0." + name},
                                           {"PET_MASTER_PORT", "29400"}});
    EXPECT_EQ(options.nnodes, nodes);
    EXPECT_EQ(options.node_rank, node);
    EXPECT_EQ(options.master_addr, name + "-node-0-0." + name);
    EXPECT_EQ(options.master_port, 29400);
    EXPECT_EQ(options.nproc_per_node, "auto") << "the pod's GPUs";
  }
}

TEST(KubernetesFiles, ThePyTorchJobRunsMgpuRunInAMasterAndWorkersWithEveryNodeInPlace) {
  const YAML::Node job = YAML::LoadFile(kFolder + "/pytorchjob.yaml");
  EXPECT_EQ(job["apiVersion"].as<std::string>(), "kubeflow.org/v1");
  EXPECT_EQ(job["kind"].as<std::string>(), "PyTorchJob");
  const std::string name = job["metadata"]["name"].as<std::string>();
  const std::string nproc = job["spec"]["nprocPerNode"].as<std::string>();
  const YAML::Node replicas = job["spec"]["pytorchReplicaSpecs"];
  ASSERT_TRUE(replicas["Master"]) << "the operator derives MASTER_ADDR from the Master replica";
  EXPECT_EQ(replicas["Master"]["replicas"].as<int>(), 1);
  ASSERT_TRUE(replicas["Worker"]);
  const int nodes = 1 + replicas["Worker"]["replicas"].as<int>();
  ASSERT_GE(nodes, 2);
  for (const char* type : {"Master", "Worker"}) {
    const YAML::Node pod = replicas[type]["template"]["spec"];
    ASSERT_EQ(pod["containers"].size(), 1u) << type;
    const YAML::Node container = pod["containers"][0];
    EXPECT_EQ(container["name"].as<std::string>(), "pytorch") << type << ": the operator's container name";
    int port = -1;
    for (const auto& p : container["ports"]) {
      if (p["name"].as<std::string>() == "pytorchjob-port") port = p["containerPort"].as<int>();
    }
    ASSERT_GT(port, 0) << type << ": the operator's MASTER_PORT is the port named pytorchjob-port";
    EXPECT_TRUE(container["resources"]["limits"]["nvidia.com/gpu"]) << type;
    ExpectTokenFromASecretAndNoPetVariables(container["env"], std::string("pytorchjob.yaml ") + type);
    std::set<std::string> mounts;
    for (const auto& mount : container["volumeMounts"]) mounts.insert(mount["mountPath"].as<std::string>());
    EXPECT_TRUE(mounts.count("/dev/shm")) << type << ": NCCL needs more than a pod's 64 MB of /dev/shm";
    const bool master = std::string(type) == "Master";
    for (int node = master ? 0 : 1; node < (master ? 1 : nodes); ++node) {
      // What training-operator v1 sets (pkg/controller.v1/pytorch/envvar.go, master.go).
      const RunOptions options = ParseInPod(Strings(container["command"]), Strings(container["args"]),
                                            {{"PET_NNODES", std::to_string(nodes)},
                                             {"PET_NPROC_PER_NODE", nproc},
                                             {"PET_NODE_RANK", std::to_string(node)},
                                             {"MASTER_ADDR", name + "-master-0"},
                                             {"MASTER_PORT", std::to_string(port)},
                                             {"RANK", std::to_string(node)},
                                             {"WORLD_SIZE", std::to_string(nodes)}});
      EXPECT_EQ(options.nnodes, nodes) << type;
      EXPECT_EQ(options.node_rank, node) << type;
      EXPECT_EQ(options.master_addr, name + "-master-0") << type;
      EXPECT_EQ(options.master_port, port) << type;
    }
  }
}

}  // namespace
}  // namespace mgpu
