// Reader for the IDX format of MNIST and Fashion-MNIST, raw or gzip-compressed.
//
// Validates everything a damaged download can get wrong: the file exists and is readable, the
// magic number (two zero bytes, type 0x08 = unsigned byte, the number of dimensions), the rank
// the caller expects, a sane size, and exactly the declared number of data bytes (a truncated or
// over-long file is an error). Failures throw BadInputError naming the file, what is wrong,
// what was expected and how to fix it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgpu {

struct IdxArray {
  std::vector<int64_t> dims;   // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;   // row-major, product(dims) bytes
};

IdxArray ReadIdxFile(const std::string& path, int expected_rank);

}  // namespace mgpu
