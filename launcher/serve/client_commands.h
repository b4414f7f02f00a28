// The clients of `mgpu serve`: `mgpu submit | status | watch | cancel | logs`. Each takes
// --server ADDR (else $MGPU_SERVER, else 127.0.0.1:29600), --token (else $MGPU_TOKEN) and
// --tls-ca PEM. Exit codes: 0 ok; 2 bad input or a request the service refused (its reason is
// printed); 1 anything else, e.g. no service at the address (naming it, and how to start one).
// `mgpu watch` exits 0 when the job succeeded and 1 when it ended otherwise.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mgpu {

// The client commands, with a line of help each, for `mgpu --help`.
const std::vector<std::pair<std::string, std::string>>& ClientCommands();

// Runs `command` (one of ClientCommands()) with `args` (after the command's name).
int ClientMain(const std::string& command, const std::vector<std::string>& args);

}  // namespace mgpu
