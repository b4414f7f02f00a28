// Text that goes into a protobuf `string` field must be UTF-8 (protobuf refuses to serialize or
// parse it otherwise, with an ERROR line of its own); user files are checked first, here.
#pragma once

#include <string>

namespace mgpu {

// Throws BadInputError naming `what` and the byte offset of the first byte that is not UTF-8.
void RequireUtf8(const std::string& text, const std::string& what);

}  // namespace mgpu
