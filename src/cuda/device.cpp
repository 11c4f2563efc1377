// CUDA availability: probes the driver and devices once and says why not.
#include <cuda_runtime.h>

#include <mutex>

#include "core/backend.h"
#include "cuda/common.h"
#include "kiln/device.h"

namespace kiln::cuda {

namespace {
constexpr int kMinCC = 80;  // the PTX fallback is compute_80; machine code is sm_90a
}

bool built_with_cuda() { return true; }
int min_compute_capability() { return kMinCC; }

const Availability& availability() {
  static Availability a;
  static std::once_flag once;
  std::call_once(once, [] {
    cudaRuntimeGetVersion(&a.runtime_version);
    if (cudaDriverGetVersion(&a.driver_version) != cudaSuccess) a.driver_version = 0;
    if (a.driver_version == 0) {
      a.reason = "no NVIDIA driver is installed (the CUDA driver reports version 0)";
      return;
    }
    if (a.driver_version < a.runtime_version) {
      a.reason = detail::format("the NVIDIA driver is too old: it supports CUDA ", a.driver_version / 1000, ".",
                                a.driver_version % 1000 / 10, " but kiln was built with CUDA ", a.runtime_version / 1000,
                                ".", a.runtime_version % 1000 / 10);
      return;
    }
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaErrorNoDevice || (err == cudaSuccess && n == 0)) {
      cudaGetLastError();
      a.reason = "the NVIDIA driver is installed but no CUDA device is visible";
      return;
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      a.reason = detail::format("CUDA initialisation failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
      return;
    }
    int usable = 0;
    for (int i = 0; i < n; ++i) {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i);
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i);
      if (major * 10 + minor >= kMinCC) ++usable;
    }
    a.device_count = n;
    if (usable == 0) {
      a.reason = detail::format("compute capability too old: kiln needs ", kMinCC / 10, ".", kMinCC % 10,
                                " or newer, and none of the ", n, " devices has it");
      return;
    }
    a.available = true;
  });
  return a;
}

bool is_available() { return availability().available; }
int device_count() { return availability().device_count; }

DeviceProperties get_device_properties(int index) {
  KILN_CHECK(is_available(), "get_device_properties: CUDA is not available: ", availability().reason);
  KILN_CHECK(index >= 0 && index < device_count(), "get_device_properties: no device cuda:", index);
  cudaDeviceProp p{};
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceProperties d;
  d.index = index;
  d.name = p.name;
  d.total_memory = p.totalGlobalMem;
  d.major = p.major;
  d.minor = p.minor;
  d.multiprocessors = p.multiProcessorCount;
  d.l2_cache_bytes = p.l2CacheSize;
  d.usable = p.major * 10 + p.minor >= kMinCC;
  if (!d.usable) d.reason = detail::format("compute capability ", p.major, ".", p.minor, " is below ", kMinCC / 10, ".", kMinCC % 10);
  return d;
}

void synchronize(int device) {
  if (device >= 0) {
    cuda_backend::DeviceGuard g(device);
    KILN_CUDA_CHECK(cudaDeviceSynchronize());
  } else {
    KILN_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

}  // namespace kiln::cuda
