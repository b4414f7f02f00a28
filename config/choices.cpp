#include "config/choices.h"

namespace mgpu {

const std::vector<std::string>& ModeNames() {
  static const std::vector<std::string> names = {"single", "dp", "ddp"};
  return names;
}

const std::string& ModeName(Mode mode) { return ModeNames()[static_cast<size_t>(mode)]; }

const std::vector<std::string>& OnNonfiniteNames() {
  static const std::vector<std::string> names = {"stop", "skip"};
  return names;
}

const std::string& OnNonfiniteName(OnNonfinite action) { return OnNonfiniteNames()[static_cast<size_t>(action)]; }

const std::vector<std::string>& DdpCompressionNames() {
  static const std::vector<std::string> names = {"none", "fp16", "bf16"};
  return names;
}

const std::string& DdpCompressionName(DdpCompression compression) {
  return DdpCompressionNames()[static_cast<size_t>(compression)];
}

const std::vector<std::string>& NumaBindingNames() {
  static const std::vector<std::string> names = {"none", "node", "socket", "exclusive", "core-complex"};
  return names;
}

const std::string& NumaBindingName(NumaBinding binding) { return NumaBindingNames()[static_cast<size_t>(binding)]; }

const std::vector<std::string>& SchedulerNames() {
  static const std::vector<std::string> names = {"none", "multistep", "cosine", "plateau"};
  return names;
}

}  // namespace mgpu
