// `mgpu serve`'s options and the rules they follow: which devices it owns (--gpus), where it
// listens (loopback unless a token or TLS protects it), where it keeps its state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu {

// The port `mgpu serve` listens on, and its clients dial, unless told otherwise.
inline constexpr int kDefaultServePort = 29600;
inline constexpr const char* kDefaultServer = "127.0.0.1:29600";

// The devices the service owns: slots that jobs get exclusively.
struct DeviceSlots {
  bool cuda = false;               // GPU indices (a job sees its slots as CUDA_VISIBLE_DEVICES), else CPU slots
  std::vector<std::string> names;  // per slot: "cpu", or the GPU's index
  int count() const { return static_cast<int>(names.size()); }
};

// --gpus LIST: GPU indices ("0,1,3"), CPU slots ("cpu,cpu"), or empty: every visible GPU, else
// 2 CPU slots. Without a visible GPU, indices name CPU slots (`--gpus 0,1` on a CPU machine is 2
// CPU slots). Throws BadInputError for a malformed list, a repeated index, an index beyond the
// visible GPUs, or a mix of both kinds.
DeviceSlots ParseDeviceSlots(const std::string& list, int visible_gpus);

struct HostPort {
  std::string host;
  int port = 0;
};

// "HOST:PORT" or "[IPv6]:PORT" (the brackets are dropped from `host`). Ports from `min_port` to
// 65535. Throws BadInputError naming `flag`.
HostPort ParseHostPort(const std::string& text, const std::string& flag, int min_port);

struct ServeOptions {
  std::string listen = kDefaultServer;  // port 0: a free one, printed at start
  std::string gpus;
  std::string state_dir;  // empty: $HOME/.local/state/mgpu/serve
  std::string token;      // --token, else MGPU_TOKEN
  std::string tls_cert, tls_key;
  int64_t checkpoint_every = 500;  // given to jobs whose configuration has none; 0: none
  double stop_grace_seconds = 10;  // SIGTERM to SIGKILL when a job is cancelled or the service stops
};

// Throws BadInputError for unsafe or incomplete combinations: a non-loopback --listen without a
// token or TLS, --tls-cert without --tls-key, a negative --checkpoint-every or grace.
void ValidateServeOptions(const ServeOptions& options);

// The state folder: --state-dir, else $HOME/.local/state/mgpu/serve.
std::string StateDirectory(const ServeOptions& options);

}  // namespace mgpu
