#include "dataparallel/dp_devices.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/split.h"
#include "common/status.h"

namespace mgpu {
namespace {

constexpr const char* kHint = "use e.g. --dp-devices cuda:0,cuda:1, --dp-devices cpu,cpu or --dp-devices auto";

bool AllDigits(const std::string& text) {
  return !text.empty() && text.size() < 6 && text.find_first_not_of("0123456789") == std::string::npos;
}

std::string NoCudaMessage(const std::string& list) {
  return fmt::format("--dp-devices {}: no CUDA device is visible to this process (check CUDA_VISIBLE_DEVICES "
                     "and the driver); use --dp-devices cpu,cpu for CPU replicas",
                     list);
}

}  // namespace

std::string DeviceLabel(const torch::Device& device) {
  return device.is_cuda() ? fmt::format("cuda:{}", device.index()) : "cpu";
}

std::vector<torch::Device> ResolveDataParallelDevices(const std::string& list, const std::string& device_flag,
                                                      int visible_cuda_devices) {
  if (list == "auto") {
    if (device_flag == "cpu" || (device_flag == "auto" && visible_cuda_devices == 0)) {
      return {torch::Device(torch::kCPU), torch::Device(torch::kCPU)};
    }
    if (visible_cuda_devices == 0) throw BadInputError(NoCudaMessage(list) + " (--device " + device_flag + ")");
    int first = 0;
    if (device_flag.rfind("cuda:", 0) == 0) first = std::stoi(device_flag.substr(5));
    if (first >= visible_cuda_devices) {
      throw BadInputError(fmt::format("--device {} with --dp-devices auto: only {} CUDA device(s) are visible "
                                      "(cuda:0 to cuda:{})",
                                      device_flag, visible_cuda_devices, visible_cuda_devices - 1));
    }
    std::vector<torch::Device> devices = {torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(first))};
    for (int i = 0; i < visible_cuda_devices; ++i) {
      if (i != first) devices.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(i));
    }
    return devices;
  }

  std::vector<torch::Device> devices;
  const std::vector<std::string> entries = SplitAt(list, ',');
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& entry = entries[i];
    if (entry.empty()) {
      throw BadInputError(fmt::format("--dp-devices '{}': entry {} is empty; {}", list, i + 1, kHint));
    }
    if (entry == "cpu") {
      devices.emplace_back(torch::kCPU);
      continue;
    }
    const std::string index = entry.rfind("cuda:", 0) == 0 ? entry.substr(5) : entry;
    if (!AllDigits(index)) {
      throw BadInputError(fmt::format("--dp-devices '{}': '{}' is not a device (cpu, cuda:K or K); {}", list, entry,
                                      kHint));
    }
    const int k = std::stoi(index);
    if (visible_cuda_devices == 0) throw BadInputError(NoCudaMessage(list));
    if (k >= visible_cuda_devices) {
      throw BadInputError(fmt::format("--dp-devices '{}': cuda:{} is not available: {} CUDA device(s) are visible "
                                      "(cuda:0 to cuda:{}); check CUDA_VISIBLE_DEVICES",
                                      list, k, visible_cuda_devices, visible_cuda_devices - 1));
    }
    const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(k));
    if (std::find(devices.begin(), devices.end(), device) != devices.end()) {
      throw BadInputError(fmt::format("--dp-devices '{}': cuda:{} is listed twice; a GPU holds one replica", list, k));
    }
    devices.push_back(device);
  }
  const bool any_cpu = std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.is_cpu(); });
  const bool any_cuda = std::any_of(devices.begin(), devices.end(), [](const auto& d) { return d.is_cuda(); });
  if (any_cpu && any_cuda) {
    throw BadInputError(fmt::format("--dp-devices '{}' mixes cpu and CUDA devices; give only CUDA devices or only "
                                    "cpu entries",
                                    list));
  }
  return devices;
}

}  // namespace mgpu
