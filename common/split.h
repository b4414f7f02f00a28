// Splitting a list given as text ("cuda:0,cuda:1", a CSV line without quoting).
//
// Hand-written rather than absl::StrSplit (which gRPC brings along): mgpu_common links nothing
// but fmt, and this is one loop.
#pragma once

#include <string>
#include <vector>

namespace mgpu {

// Every piece of `text` between `separator`s, empty ones included: "a,,b" is {"a", "", "b"},
// "" is {""}. Callers decide what an empty piece means.
std::vector<std::string> SplitAt(const std::string& text, char separator);

}  // namespace mgpu
