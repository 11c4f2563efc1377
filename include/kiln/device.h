// Devices and their availability.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}
  // "cpu", "cuda", "cuda:1"; throws on anything else.
  Device(const std::string& spec);  // NOLINT: implicit, as torch.device("cuda")
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline const Device kCPU{DeviceType::CPU, 0};

namespace cuda {

// Whether kiln can use CUDA here, and if not, why.
struct Availability {
  bool available = false;
  std::string reason;        // empty when available
  int driver_version = 0;    // CUDA version the driver supports (e.g. 13000), 0 = no driver
  int runtime_version = 0;   // CUDA runtime kiln was built with, 0 = built without CUDA
  int device_count = 0;
};

struct DeviceProperties {
  int index = 0;
  std::string name;
  size_t total_memory = 0;
  int major = 0, minor = 0;
  int multiprocessors = 0;
  size_t l2_cache_bytes = 0;
  bool usable = false;        // compute capability new enough for kiln's kernels
  std::string reason;         // why not usable
};

// True when kiln was compiled with its CUDA backend.
bool built_with_cuda();
// Probes the driver and devices once; cached.
const Availability& availability();
bool is_available();
int device_count();
DeviceProperties get_device_properties(int index);
// Oldest compute capability kiln's CUDA kernels run on (major*10+minor).
int min_compute_capability();
// Waits for all work on the device.
void synchronize(int device = -1);

}  // namespace cuda
}  // namespace kiln
