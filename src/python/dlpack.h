// DLPack interchange (https://dmlc.github.io/dlpack): the C ABI structs, written
// out here because the header is not packaged for Debian 12 or on the GPU
// machine, and the conversion between them and kiln::Tensor. The legacy
// (unversioned) "dltensor" capsule is what every consumer still accepts.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

extern "C" {
struct DLDevice {
  int32_t device_type;  // kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // see dl_code below
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL = compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
}

namespace kiln::python {

namespace dl_device {
inline constexpr int32_t kCPU = 1, kCUDA = 2, kCUDAHost = 3;
}
namespace dl_code {
inline constexpr uint8_t kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kComplex = 5, kBool = 6,
                         kFloat8_e4m3fn = 10, kFloat8_e5m2 = 12;
}

DLDataType to_dl_dtype(DType dt);
// Throws kiln::Error naming the code and bits when kiln has no such dtype.
DType from_dl_dtype(DLDataType dt);

// A DLManagedTensor that keeps `t` (and its storage) alive until its deleter runs.
DLManagedTensor* to_dlpack(const Tensor& t);
// Wraps the producer's memory without a copy. `release(managed)` runs when the
// last kiln view goes away, or at once when the checks (ndim, dtype, lanes,
// device, strides) throw; it must call managed->deleter.
Tensor from_dlpack(DLManagedTensor* managed, std::function<void(DLManagedTensor*)> release);

}  // namespace kiln::python
