// `mgpu serve`'s options and the rules they follow: which devices it owns (--gpus), where it
// listens (its Unix socket; TCP only with a token, and TLS unless loopback), who may run it (not
// root, unless --allow-root), where it keeps its state, and where jobs may read and write.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu {

// The port of the examples for `mgpu serve --listen`.
inline constexpr int kDefaultServePort = 29600;

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
  std::string listen;  // HOST:PORT for TCP as well as the socket; "": the socket only
  std::string gpus;
  std::string state_dir;  // empty: $HOME/.local/state/mgpu/serve
  std::string token;      // from --token-file, else MGPU_TOKEN (LoadToken)
  std::string token_file;
  std::string tls_cert, tls_key;
  std::vector<std::string> allow_path;  // folders jobs may read and write
  std::vector<std::string> allow_read;  // folders jobs may read (data, models)
  bool allow_plugins = false;
  bool allow_root = false;
  int64_t checkpoint_every = 500;  // given to jobs whose configuration has none; 0: none
  double stop_grace_seconds = 10;  // SIGTERM to SIGKILL when a job is cancelled or the service stops
};

// Throws BadInputError for unsafe or incomplete combinations: --listen without a token, a
// --listen host with any address that is not loopback (after resolution) without TLS, TLS
// without --listen, --tls-cert without --tls-key, a negative --checkpoint-every or grace.
void ValidateServeOptions(const ServeOptions& options);

// Throws BadInputError when the service would run as root (`euid` 0) without --allow-root: jobs
// run as the service's user, so a root service would run every submitted job as root.
void CheckServiceUser(const ServeOptions& options, uid_t euid);

// The state folder: --state-dir, else $HOME/.local/state/mgpu/serve.
std::string StateDirectory(const ServeOptions& options);

// What clients dial without --server or MGPU_SERVER: the socket of the default state folder,
// "unix:$HOME/.local/state/mgpu/serve/serve.sock".
std::string DefaultServerAddress();

}  // namespace mgpu
