// CRC-32C (Castagnoli), as TFRecord framing uses it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mgpu {

uint32_t Crc32c(const void* data, size_t size);

// TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskedCrc32c(const void* data, size_t size);

}  // namespace mgpu
