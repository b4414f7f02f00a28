#include "common/crc32c.h"

#include <array>

namespace mgpu {
namespace {

constexpr uint32_t kCastagnoliReversed = 0x82f63b78u;
constexpr uint32_t kTfRecordMaskDelta = 0xa282ead8u;

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kCastagnoliReversed : 0u);
    table[i] = crc;
  }
  return table;
}

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = MakeTable();
  const auto* bytes = static_cast<const uint8_t*>(data);
  crc ^= 0xffffffffu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xffu] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

uint32_t MaskedCrc32c(const void* data, size_t size) {
  const uint32_t crc = Crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + kTfRecordMaskDelta;
}

}  // namespace mgpu
