// Options whose values are a fixed set of names, parsed once, when the option is set
// (config/train_config.h), into the enums the rest of the code tests: the execution mode, what a
// non-finite loss does, DDP's gradient compression, the CPU binding. Each enum's names are one
// list, in the enum's order; fmt prints a value as its name, so messages read as the flags were
// written.
// Also the learning-rate schedules' names (optim/lr_scheduler.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace mgpu {

// --mode: single (one process, one device), dp (one process, the batch split over devices),
// ddp (one process per device, gradients all-reduced).
enum class Mode { kSingle, kDp, kDdp };
const std::vector<std::string>& ModeNames();
const std::string& ModeName(Mode mode);

// --on-nonfinite: a non-finite loss stops the run (exit 3) or its step is skipped.
enum class OnNonfinite { kStop, kSkip };
const std::vector<std::string>& OnNonfiniteNames();
const std::string& OnNonfiniteName(OnNonfinite action);

// --ddp-compression: DDP's buckets are all-reduced as they are, or cast to float16 / bfloat16.
enum class DdpCompression { kNone, kFp16, kBf16 };
const std::vector<std::string>& DdpCompressionNames();
const std::string& DdpCompressionName(DdpCompression compression);

// --numa-binding (torchrun's names and modes): which CPUs a rank's threads may run on, chosen by
// where its GPU sits: none (all the process may use), node (the GPU's NUMA node), socket (the
// node's sockets), exclusive (a share of the node's cores of its own), core-complex (one L3 cache
// domain of the node). worker/numa_binding.h applies it.
enum class NumaBinding { kNone, kNode, kSocket, kExclusive, kCoreComplex };
const std::vector<std::string>& NumaBindingNames();
const std::string& NumaBindingName(NumaBinding binding);

// --scheduler: "none", "multistep", "cosine", "plateau" (optim/lr_scheduler.h).
const std::vector<std::string>& SchedulerNames();

// fmt's formatter for an enum whose values are printed as `name(value)`.
template <typename Enum, const std::string& (*name)(Enum)>
struct EnumNameFormatter : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(Enum value, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(name(value)), ctx);
  }
};

}  // namespace mgpu

template <>
struct fmt::formatter<mgpu::Mode> : mgpu::EnumNameFormatter<mgpu::Mode, mgpu::ModeName> {};
template <>
struct fmt::formatter<mgpu::OnNonfinite> : mgpu::EnumNameFormatter<mgpu::OnNonfinite, mgpu::OnNonfiniteName> {};
template <>
struct fmt::formatter<mgpu::DdpCompression>
    : mgpu::EnumNameFormatter<mgpu::DdpCompression, mgpu::DdpCompressionName> {};
template <>
struct fmt::formatter<mgpu::NumaBinding> : mgpu::EnumNameFormatter<mgpu::NumaBinding, mgpu::NumaBindingName> {};
