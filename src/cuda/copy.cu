// CUDA copy/cast, fill, arange, where.
//
// Casts run flat over contiguous data (one kernel per dtype pair); a strided
// copy moves raw elements of one size. A strided cast is the two in sequence,
// which keeps the number of kernel instantiations (and build time) small.
#include <cstring>

#include "core/convert.h"
#include "core/shape.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {

struct Identity {
  template <class T>
  __device__ T operator()(T x) const { return x; }
};

template <class D, class S>
struct CastFn {
  bool saturate;
  __device__ D operator()(S x) const { return detail::convert<D>(x, saturate); }
};

template <class F>
void dispatch_bits(size_t size, F&& f) {
  switch (size) {
    case 1: f(detail::TypeTag<uint8_t>{}); return;
    case 2: f(detail::TypeTag<uint16_t>{}); return;
    case 4: f(detail::TypeTag<uint32_t>{}); return;
    case 8: f(detail::TypeTag<uint64_t>{}); return;
  }
  throw Error("cuda copy: unsupported element size");
}

void raw_copy(const Tensor& dst, const Tensor& src) {
  if (dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape() &&
      src.strides() == dst.strides()) {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                    current_stream()));
    return;
  }
  dispatch_bits(dst.itemsize(), [&](auto tag) {
    using B = typename decltype(tag)::type;
    launch_map1<B, B>(dst, src, Identity{});
  });
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src, bool saturate) {
  if (dst.dtype() == src.dtype()) return raw_copy(dst, src);
  KILN_CHECK(dst.dtype() != DType::Complex64 && src.dtype() != DType::Complex64,
             "copy: casting to or from complex64 is not supported on CUDA yet (", dtype_name(src.dtype()), " -> ",
             dtype_name(dst.dtype()), ")");
  // flat cast needs both contiguous with the same shape (no broadcast)
  const bool src_flat = src.is_contiguous() && storage_span(src.shape(), src.strides()) == src.numel();
  Tensor s = src_flat ? src : src.contiguous();
  Tensor d = dst.is_contiguous() ? dst : Tensor::empty(dst.shape(), dst.dtype(), dst.device());
  detail::dispatch_real(d.dtype(), "copy", [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    detail::dispatch_real(s.dtype(), "copy", [&](auto stag) {
      using S = typename decltype(stag)::type;
      launch_map1<D, S>(d, s, CastFn<D, S>{saturate});
    });
  });
  if (!d.is_alias_of(dst)) raw_copy(dst, d);
}

namespace {
template <class T>
struct Const {
  T v;
  __device__ T operator()(T) const { return v; }
};
}  // namespace

void fill(const Tensor& dst, const Scalar& value) {
  if (dst.dtype() == DType::Complex64) {
    const auto c = detail::scalar_to<std::complex<float>>(value);
    uint64_t bits;
    static_assert(sizeof(bits) == sizeof(c));
    std::memcpy(&bits, &c, 8);
    launch_map1<uint64_t, uint64_t>(dst.view(DType::UInt64), dst.view(DType::UInt64), Const<uint64_t>{bits});
    return;
  }
  detail::dispatch_real(dst.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map1<T, T>(dst, dst, Const<T>{detail::scalar_to<T>(value)});
  });
}

namespace {
template <class T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step, int64_t istart, int64_t istep) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    if constexpr (std::is_integral_v<T>) out[i] = static_cast<T>(istart + i * istep);
    else out[i] = T(static_cast<float>(start + static_cast<double>(i) * step));
  }
}

template <class T>
__global__ void where_kernel(StridedLayout<4> L, T* out, const bool* c, const T* a, const T* b) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < L.numel; i += stride) {
    int64_t off[4];
    L.offsets(i, off);
    out[off[0]] = c[off[1]] ? a[off[2]] : b[off[3]];
  }
}
}  // namespace

void arange(const Tensor& out, const Scalar& start, const Scalar& step) {
  detail::dispatch_arith(out.dtype(), "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = out.numel();
    arange_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
        out.data<T>(), n, start.to_double(), step.to_double(), start.to_int64(), step.to_int64());
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Tensor* ops[4] = {&out, &cond, &a, &b};
  const auto L = layout_or_throw(ops);
  dispatch_bits(out.itemsize(), [&](auto tag) {
    using B = typename decltype(tag)::type;
    where_kernel<<<grid_for(L.numel, kThreads), kThreads, 0, current_stream()>>>(
        L, static_cast<B*>(out.data_ptr()), cond.data<bool>(), static_cast<const B*>(a.data_ptr()),
        static_cast<const B*>(b.data_ptr()));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda_backend
