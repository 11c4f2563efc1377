#include "python/dlpack.h"

#include <vector>

#include "core/check.h"

namespace kiln::python {

namespace {
// The DLPack type code of every kiln dtype (bits = 8 * itemsize); one table both ways.
struct DLCode {
  DType dtype;
  uint8_t code;
};
constexpr DLCode kDLCodes[] = {
    {DType::Bool, dl_code::kBool},        {DType::UInt8, dl_code::kUInt},
    {DType::UInt16, dl_code::kUInt},      {DType::UInt32, dl_code::kUInt},
    {DType::UInt64, dl_code::kUInt},      {DType::Int8, dl_code::kInt},
    {DType::Int16, dl_code::kInt},        {DType::Int32, dl_code::kInt},
    {DType::Int64, dl_code::kInt},        {DType::Float16, dl_code::kFloat},
    {DType::Float32, dl_code::kFloat},    {DType::BFloat16, dl_code::kBfloat},
    {DType::Float8_e4m3fn, dl_code::kFloat8_e4m3fn}, {DType::Float8_e5m2, dl_code::kFloat8_e5m2},
    {DType::Complex64, dl_code::kComplex},
};
static_assert(sizeof(kDLCodes) / sizeof(kDLCodes[0]) == kNumDTypes, "every dtype needs a DLPack code");

uint8_t bits_of(DType dt) { return static_cast<uint8_t>(itemsize(dt) * 8); }
}  // namespace

DLDataType to_dl_dtype(DType dt) {
  for (const DLCode& c : kDLCodes)
    if (c.dtype == dt) return {c.code, bits_of(dt), 1};
  throw Error("to_dlpack: unknown dtype");
}

DType from_dl_dtype(DLDataType dt) {
  KILN_CHECK(dt.lanes == 1, "from_dlpack: vector dtypes (lanes = ", dt.lanes, ") are not supported");
  for (const DLCode& c : kDLCodes)
    if (c.code == dt.code && bits_of(c.dtype) == dt.bits) return c.dtype;
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
