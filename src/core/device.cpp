#include "kiln/device.h"

#include "core/check.h"

namespace kiln {

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::CPU;
    index = 0;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::CUDA;
    index = 0;
    if (spec.size() == 4) return;
    if (spec.size() > 5 && spec[4] == ':' && spec.find_first_not_of("0123456789", 5) == std::string::npos) {
      index = std::stoi(spec.substr(5));
      return;
    }
  }
  throw Error("invalid device string '" + spec + "' (expected 'cpu', 'cuda' or 'cuda:N')");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace kiln
