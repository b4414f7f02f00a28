#include "amp/autocast.h"

#include <ATen/autocast_mode.h>

namespace mgpu {

AutocastScope::AutocastScope(c10::DeviceType device_type, torch::ScalarType dtype, bool enabled,
                             bool cache_enabled)
    : device_type_(device_type),
      previous_enabled_(at::autocast::is_autocast_enabled(device_type)),
      previous_dtype_(at::autocast::get_autocast_dtype(device_type)),
      previous_cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_enabled(device_type_, enabled);
  at::autocast::set_autocast_dtype(device_type_, dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(cache_enabled);
}

AutocastScope::~AutocastScope() {
  // The cache holds low-precision copies of leaf weights made in forward; it is only valid
  // while the outermost scope lives (the weights change at the next optimizer step).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
  at::autocast::set_autocast_cache_enabled(previous_cache_enabled_);
}

}  // namespace mgpu
