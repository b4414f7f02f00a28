// Real: a double as messages, logs and text outputs print it.
//
// A NaN's sign bit is an accident of the instruction that produced it: x86's "default NaN" is
// negative, and the AVX-512 and AVX2 paths of the same ATen kernel can make NaNs of either
// sign. fmt prints the sign ("-nan"), so the same diverged run would read differently on two
// CPUs. Real prints every NaN as "nan"; infinities keep their sign ("inf", "-inf"); every other
// value formats exactly as a double with the same format spec ({:.4f}, {:g}, ...).
//
//   fmt::format("loss became {}", Real{loss});
#pragma once

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace mgpu {

struct Real {
  double value;
};

}  // namespace mgpu

template <>
struct fmt::formatter<mgpu::Real> : fmt::formatter<double> {
  template <typename FormatContext>
  auto format(mgpu::Real real, FormatContext& ctx) const -> decltype(ctx.out()) {
    const double value = std::isnan(real.value) ? std::numeric_limits<double>::quiet_NaN() : real.value;
    return fmt::formatter<double>::format(value, ctx);
  }
};
