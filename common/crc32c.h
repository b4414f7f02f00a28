// CRC-32C (Castagnoli): TFRecord framing (report/tensorboard_writer) and checkpoint integrity
// (worker/checkpoint_file). A table-driven loop of a dozen lines: the one Debian library for it
// (libcrc32c) would be a new dependency for files of a few megabytes a minute.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mgpu {

uint32_t Crc32c(const void* data, size_t size);

// The CRC-32C of the bytes `crc` covers followed by `data`: Crc32cExtend(Crc32c(a), b) ==
// Crc32c(a + b), and Crc32cExtend(0, a) == Crc32c(a).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// TFRecord's masked form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskedCrc32c(const void* data, size_t size);

}  // namespace mgpu
