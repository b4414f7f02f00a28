#include "launcher/run/run_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "common/status.h"
#include "launcher/net.h"
#include "launcher/run/node_environment.h"

namespace mgpu {
namespace {

int ParseCount(const std::string& flag, const std::string& text, int min_value, int max_value) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < min_value || value > max_value) {
    throw BadInputError(fmt::format("--{} '{}': expected an integer from {} to {}", flag, text, min_value, max_value));
  }
  return static_cast<int>(value);
}

struct Flag {
  std::string name;  // kebab-case, without --
  bool takes_value;
  std::function<void(RunOptions&, const std::string&)> set;
};

const std::vector<Flag>& Flags() {
  static const std::vector<Flag> flags = {
      {"nproc-per-node", true,
       [](RunOptions& o, const std::string& v) {
         if (v != "auto") ParseCount("nproc-per-node", v, 1, 1024);
         o.nproc_per_node = v;
       }},
      {"nnodes", true, [](RunOptions& o, const std::string& v) { o.nnodes = ParseCount("nnodes", v, 1, 1024); }},
      {"node-rank", true, [](RunOptions& o, const std::string& v) { o.node_rank = ParseCount("node-rank", v, 0, 1023); }},
      {"master-addr", true,
       [](RunOptions& o, const std::string& v) {
         if (v.empty()) throw BadInputError("--master-addr: expected a host name or address");
         o.master_addr = v;
       }},
      {"master-port", true, [](RunOptions& o, const std::string& v) { o.master_port = ParseCount("master-port", v, 1, 65535); }},
      {"coordinator-port", true,
       [](RunOptions& o, const std::string& v) { o.coordinator_port = ParseCount("coordinator-port", v, 1, 65535); }},
      {"max-restarts", true,
       [](RunOptions& o, const std::string& v) { o.max_restarts = ParseCount("max-restarts", v, 0, 1000); }},
      {"log-dir", true, [](RunOptions& o, const std::string& v) { o.log_dir = v; }},
      {"tee", false, [](RunOptions& o, const std::string&) { o.tee = true; }},
      {"heartbeat-timeout", true,
       [](RunOptions& o, const std::string& v) {
         char* end = nullptr;
         const double seconds = std::strtod(v.c_str(), &end);
         if (v.empty() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0) {
           throw BadInputError(fmt::format("--heartbeat-timeout '{}': expected seconds > 0", v));
         }
         o.heartbeat_timeout = seconds;
       }},
      {"token", true, [](RunOptions& o, const std::string& v) { o.token = v; }},
      {"tls-cert", true, [](RunOptions& o, const std::string& v) { o.tls_cert = v; }},
      {"tls-key", true, [](RunOptions& o, const std::string& v) { o.tls_key = v; }},
      {"tls-ca", true, [](RunOptions& o, const std::string& v) { o.tls_ca = v; }},
  };
  return flags;
}

const Flag* FindFlag(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  for (const auto& flag : Flags()) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

// The environment's layout into the fields no flag set; records where they came from.
void ApplyNodeLayout(const NodeLayout& layout, const std::set<std::string>& given, RunOptions& o) {
  if (layout.source.empty()) return;
  const auto unset = [&](const char* flag) { return given.count(flag) == 0; };
  if (layout.nnodes && unset("nnodes")) o.nnodes = *layout.nnodes;
  if (layout.node_rank && unset("node-rank")) o.node_rank = *layout.node_rank;
  if (layout.nproc_per_node && unset("nproc-per-node")) o.nproc_per_node = *layout.nproc_per_node;
  if (layout.master_addr && unset("master-addr")) o.master_addr = *layout.master_addr;
  if (layout.master_port && unset("master-port")) o.master_port = *layout.master_port;
  bool any_flag = false;
  for (const char* flag : {"nnodes", "node-rank", "nproc-per-node", "master-addr", "master-port"}) any_flag |= !unset(flag);
  o.layout_source = any_flag ? "flags over " + layout.source : layout.source;
}

void Validate(const RunOptions& o) {
  if (o.node_rank >= o.nnodes) {
    throw BadInputError(fmt::format("--node-rank {} is out of range for --nnodes {} (node ranks run from 0 to {}){}",
                                    o.node_rank, o.nnodes, o.nnodes - 1,
                                    o.layout_source.empty() ? "" : " (from " + o.layout_source + ")"));
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    throw BadInputError("--tls-cert and --tls-key go together: give both (the coordinator's certificate and key)");
  }
  const bool tls = !o.tls_cert.empty();
  if (!IsLoopbackAddress(o.master_addr) && o.token.empty() && !tls) {
    throw BadInputError(fmt::format(
        "--master-addr {} is not a loopback address: the coordinator would accept calls from the network. Give a "
        "shared secret with --token (or MGPU_TOKEN) on every node, or TLS with --tls-cert/--tls-key/--tls-ca",
        o.master_addr));
  }
  if (o.nnodes > 1 && o.max_restarts > 0) {
    throw BadInputError("--max-restarts works with one node only (--nnodes 1) in this version");
  }
  for (const std::string& arg : o.worker_args) {
    for (const char* owned : {"--rank", "--world-size", "--world_size", "--local-rank", "--local_rank"}) {
      if (arg == owned || arg.rfind(std::string(owned) + "=", 0) == 0) {
        throw BadInputError(fmt::format("{} is set by mgpu run for each worker; leave it out (use --nproc-per-node, "
                                        "--nnodes and --node-rank)", owned));
      }
    }
  }
}

}  // namespace

std::string RunUsage() {
  return R"(Usage: mgpu run [launcher flags] [worker flags...]

Starts one training job: --nproc-per-node mgpu-worker processes on this node, supervised through
a gRPC coordinator. Every flag not listed here goes to each worker (`mgpu-worker --help`).

  --nproc-per-node N|auto  workers on this node (auto: visible GPUs, else 2) [auto]
  --nnodes N               nodes in the job [1]
  --node-rank K            this node's rank; node 0 runs the coordinator [0]
  --master-addr HOST       where rank 0 serves the rendezvous store and node 0 the
                           coordinator [127.0.0.1]
  --master-port PORT       rendezvous port [a free port on one node, 29500 on several]
  --coordinator-port PORT  coordinator port [a free port on one node, master-port + 1 on several]
  --max-restarts N         restart the whole group after a failure up to N times, with
                           --resume <out>/checkpoints/latest.ckpt when it exists [0]
  --log-dir DIR            each rank's console output as rank-K.console.log [<out>/logs]
  --tee                    every rank's output on the terminal, lines prefixed [rank K]
                           (default: rank 0's only)
  --heartbeat-timeout S    a rank silent, or training without a step, for S seconds is
                           declared hung and the job stopped [60]
  --token SECRET           shared secret every RPC must carry [$MGPU_TOKEN]; needed (or TLS)
                           when --master-addr is not a loopback address
  --tls-cert PEM --tls-key PEM   serve the coordinator over TLS
  --tls-ca PEM             the CA that workers and other nodes trust for the coordinator

--nnodes, --node-rank, --nproc-per-node, --master-addr and --master-port left out are read from
Kubeflow's PET_* variables, or from Slurm's under srun (one `mgpu run` task per node); the flags
win. See docs/CLUSTERS.md.
)";
}

std::optional<RunOptions> ParseRunOptions(const std::vector<std::string>& args, const EnvLookup& env) {
  RunOptions options;
  if (const char* token = env("MGPU_TOKEN"); token != nullptr) options.token = token;
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") return std::nullopt;
    if (arg.rfind("--", 0) != 0) {
      options.worker_args.push_back(arg);
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const Flag* flag = FindFlag(name);
    if (flag == nullptr) {
      options.worker_args.push_back(arg);
      continue;
    }
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (flag->takes_value) {
      if (i + 1 >= args.size()) throw BadInputError(fmt::format("--{} needs a value", flag->name));
      value = args[++i];
    }
    flag->set(options, value);
    given.insert(flag->name);
  }
  ApplyNodeLayout(NodeLayoutFromEnvironment(env), given, options);
  Validate(options);
  return options;
}

}  // namespace mgpu
