#include "python/dlpack.h"

#include <vector>

#include "core/check.h"

namespace kiln::python {

DLDataType to_dl_dtype(DType dt) {
  const auto bits = static_cast<uint8_t>(itemsize(dt) * 8);
  switch (dt) {
    case DType::Bool: return {dl_code::kBool, 8, 1};
    case DType::UInt8: case DType::UInt16: case DType::UInt32: case DType::UInt64: return {dl_code::kUInt, bits, 1};
    case DType::Int8: case DType::Int16: case DType::Int32: case DType::Int64: return {dl_code::kInt, bits, 1};
    case DType::Float16: case DType::Float32: return {dl_code::kFloat, bits, 1};
    case DType::BFloat16: return {dl_code::kBfloat, 16, 1};
    case DType::Float8_e4m3fn: return {dl_code::kFloat8_e4m3fn, 8, 1};
    case DType::Float8_e5m2: return {dl_code::kFloat8_e5m2, 8, 1};
    case DType::Complex64: return {dl_code::kComplex, 64, 1};
  }
  throw Error("to_dlpack: unknown dtype");
}

DType from_dl_dtype(DLDataType dt) {
  KILN_CHECK(dt.lanes == 1, "from_dlpack: vector dtypes (lanes = ", dt.lanes, ") are not supported");
  switch (dt.code) {
    case dl_code::kBool:
      if (dt.bits == 8) return DType::Bool;
      break;
    case dl_code::kUInt:
      if (dt.bits == 8) return DType::UInt8;
      if (dt.bits == 16) return DType::UInt16;
      if (dt.bits == 32) return DType::UInt32;
      if (dt.bits == 64) return DType::UInt64;
      break;
    case dl_code::kInt:
      if (dt.bits == 8) return DType::Int8;
      if (dt.bits == 16) return DType::Int16;
      if (dt.bits == 32) return DType::Int32;
      if (dt.bits == 64) return DType::Int64;
      break;
    case dl_code::kFloat:
      if (dt.bits == 16) return DType::Float16;
      if (dt.bits == 32) return DType::Float32;
      break;
    case dl_code::kBfloat:
      if (dt.bits == 16) return DType::BFloat16;
      break;
    case dl_code::kComplex:
      if (dt.bits == 64) return DType::Complex64;
      break;
    case dl_code::kFloat8_e4m3fn:
      if (dt.bits == 8) return DType::Float8_e4m3fn;
      break;
    case dl_code::kFloat8_e5m2:
      if (dt.bits == 8) return DType::Float8_e5m2;
      break;
    default: break;
  }
  throw Error(detail::format("from_dlpack: kiln has no dtype for DLPack type code ", int(dt.code), " with ",
                             int(dt.bits), " bits (float64 and complex128 are not kiln dtypes: cast first)"));
}

namespace {
struct ExportContext {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};
}  // namespace

DLManagedTensor* to_dlpack(const Tensor& t) {
  KILN_CHECK(t.defined(), "to_dlpack: the tensor is undefined");
  auto* ctx = new ExportContext{t, t.shape(), t.strides(), {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.data_ptr();  // as torch: the view's first element, byte_offset 0
  dl.byte_offset = 0;
  if (!dl.data) {  // zero-size storage: consumers still want a non-null, aligned pointer
    alignas(256) static char empty_storage[256];
    dl.data = empty_storage;
  }
  dl.device = {t.is_cuda() ? dl_device::kCUDA : dl_device::kCPU, t.is_cuda() ? t.device().index : 0};
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](DLManagedTensor* self) { delete static_cast<ExportContext*>(self->manager_ctx); };
  return &ctx->managed;
}

Tensor from_dlpack(DLManagedTensor* managed, std::function<void(DLManagedTensor*)> release) {
  KILN_CHECK(managed != nullptr, "from_dlpack: null DLManagedTensor");
  const DLTensor& dl = managed->dl_tensor;
  try {
    KILN_CHECK(dl.ndim >= 0 && dl.ndim <= 64, "from_dlpack: bad ndim ", dl.ndim);
    Device device;
    switch (dl.device.device_type) {
      case dl_device::kCPU:
      case dl_device::kCUDAHost: device = kCPU; break;
      case dl_device::kCUDA: device = Device(DeviceType::CUDA, dl.device.device_id); break;
      default:
        throw Error(detail::format("from_dlpack: DLPack device type ", dl.device.device_type,
                                   " is not supported (kiln takes CPU = 1, CUDA = 2, CUDA host = 3)"));
    }
    const DType dtype = from_dl_dtype(dl.dtype);
    Shape shape(dl.shape, dl.shape + dl.ndim);
    Shape strides;
    if (dl.strides) {
      strides.assign(dl.strides, dl.strides + dl.ndim);
    } else {
      strides.assign(shape.size(), 1);
      for (int i = dl.ndim - 2; i >= 0; --i) strides[i] = strides[i + 1] * std::max<int64_t>(shape[i + 1], 1);
    }
    for (int i = 0; i < dl.ndim; ++i) {
      KILN_CHECK(shape[i] >= 0, "from_dlpack: negative size ", shape[i], " in shape ", shape);
      KILN_CHECK(strides[i] >= 0 || shape[i] <= 1, "from_dlpack: negative stride ", strides[i], " in strides ",
                 strides, " is not supported");
      if (shape[i] <= 1) strides[i] = std::max<int64_t>(strides[i], 0);
    }
    const size_t item = itemsize(dtype);
    KILN_CHECK(dl.byte_offset % item == 0, "from_dlpack: byte_offset ", dl.byte_offset,
               " is not a multiple of the element size ", item);
    void* data = static_cast<char*>(dl.data) + dl.byte_offset;
    return Tensor::from_blob(data, shape, strides, dtype, device, [managed, release](void*) { release(managed); });
  } catch (...) {
    release(managed);
    throw;
  }
}

}  // namespace kiln::python
