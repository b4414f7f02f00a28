#include "launcher/serve/serve_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "common/split.h"
#include "common/status.h"
#include "launcher/net.h"
#include "launcher/serve/peer_socket.h"

namespace mgpu {
namespace {

constexpr int kMaxSlots = 1024;

bool IsIndex(const std::string& text) {
  return !text.empty() && text.size() <= 4 && text.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

DeviceSlots ParseDeviceSlots(const std::string& list, int visible_gpus) {
  DeviceSlots slots;
  if (list.empty()) {
    slots.cuda = visible_gpus > 0;
    for (int i = 0; i < (slots.cuda ? visible_gpus : 2); ++i) slots.names.push_back(slots.cuda ? std::to_string(i) : "cpu");
    return slots;
  }
  const std::vector<std::string> items = SplitAt(list, ',');
  if (items.size() > static_cast<size_t>(kMaxSlots)) {
    throw BadInputError(fmt::format("--gpus lists {} devices; at most {}", items.size(), kMaxSlots));
  }
  const bool cpu = std::all_of(items.begin(), items.end(), [](const std::string& s) { return s == "cpu"; });
  const bool indices = std::all_of(items.begin(), items.end(), IsIndex);
  if (!cpu && !indices) {
    throw BadInputError(fmt::format("--gpus '{}': expected GPU indices (e.g. 0,1,3) or CPU slots (e.g. cpu,cpu), "
                                    "not a mix or other names",
                                    list));
  }
  slots.cuda = indices && visible_gpus > 0;
  for (const std::string& item : items) {
    if (indices && visible_gpus > 0) {
      if (std::stoi(item) >= visible_gpus) {
        throw BadInputError(fmt::format("--gpus '{}': GPU {} does not exist; this machine shows {} GPU(s), 0 to {}",
                                        list, item, visible_gpus, visible_gpus - 1));
      }
      if (std::count(items.begin(), items.end(), item) > 1) {
        throw BadInputError(fmt::format("--gpus '{}': GPU {} is listed twice; each GPU is one slot", list, item));
      }
    }
    slots.names.push_back(slots.cuda ? std::to_string(std::stoi(item)) : "cpu");
  }
  return slots;
}

HostPort ParseHostPort(const std::string& text, const std::string& flag, int min_port) {
  const size_t colon = text.rfind(':');
  HostPort result;
  if (colon == std::string::npos || colon == 0) {
    throw BadInputError(fmt::format("{} '{}': expected HOST:PORT, e.g. 127.0.0.1:{}", flag, text, kDefaultServePort));
  }
  result.host = text.substr(0, colon);
  if (result.host.front() == '[') {
    if (result.host.back() != ']' || result.host.size() < 3) {
      throw BadInputError(fmt::format("{} '{}': an IPv6 address goes in brackets, e.g. [::1]:{}", flag, text,
                                      kDefaultServePort));
    }
    result.host = result.host.substr(1, result.host.size() - 2);
  } else if (result.host.find(':') != std::string::npos) {
    throw BadInputError(fmt::format("{} '{}': put an IPv6 address in brackets, e.g. [::1]:{}", flag, text,
                                    kDefaultServePort));
  }
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || errno != 0 || value < min_port || value > 65535) {
    throw BadInputError(fmt::format("{} '{}': the port must be a number from {} to 65535", flag, text, min_port));
  }
  result.port = static_cast<int>(value);
  return result;
}

void ValidateServeOptions(const ServeOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    throw BadInputError("--tls-cert and --tls-key go together: give both (the service's certificate and key)");
  }
  if (options.listen.empty()) {
    if (!options.tls_cert.empty() || !options.token_file.empty()) {
      throw BadInputError("--tls-cert and --token-file are for TCP: add --listen HOST:PORT (the Unix socket needs "
                          "neither: only the service's user can reach it)");
    }
  } else {
    const HostPort listen = ParseHostPort(options.listen, "--listen", 0);
    if (options.token.empty()) {
      throw BadInputError(fmt::format(
          "--listen {}: over TCP anyone who can reach the port could submit jobs; give a shared secret in "
          "--token-file FILE (or MGPU_TOKEN; clients pass the same), or leave --listen out to serve only this "
          "machine's user on the Unix socket",
          options.listen));
    }
    if (options.tls_cert.empty() && !IsLoopbackAddress(listen.host)) {
      throw BadInputError(fmt::format(
          "--listen {}: {} is not (only) a loopback address, so the token would cross the network in clear; give "
          "TLS with --tls-cert/--tls-key (clients pass --tls-ca), or listen on 127.0.0.1",
          options.listen, listen.host));
    }
  }
  if (options.checkpoint_every < 0) {
    throw BadInputError(fmt::format("--checkpoint-every {}: expected steps >= 0 (0: jobs checkpoint only if their "
                                    "configuration says so)",
                                    options.checkpoint_every));
  }
  if (!(options.stop_grace_seconds > 0) || options.stop_grace_seconds > 3600) {
    throw BadInputError(fmt::format("--stop-grace {}: expected seconds from above 0 to 3600", options.stop_grace_seconds));
  }
}

void CheckServiceUser(const ServeOptions& options, uid_t euid) {
  if (euid == 0 && !options.allow_root) {
    throw BadInputError("mgpu serve runs every job as its own user, so as root it would run anyone's job as root: "
                        "run it as a dedicated user (e.g. `sudo -u mgpu mgpu serve`), or pass --allow-root if only "
                        "root will submit");
  }
}

std::string StateDirectory(const ServeOptions& options) {
  if (!options.state_dir.empty()) return options.state_dir;
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    throw BadInputError("--state-dir is needed: $HOME is not set, so there is no default (~/.local/state/mgpu/serve)");
  }
  return std::string(home) + "/.local/state/mgpu/serve";
}

std::string DefaultServerAddress() { return "unix:" + SocketPath(StateDirectory(ServeOptions())); }

}  // namespace mgpu
