// CUDA copy/cast, fill, arange, where.
//
// Casts run flat over contiguous data (one kernel per dtype pair); a strided
// copy moves raw elements of one size. A strided cast is the two in sequence,
// which keeps the number of kernel instantiations (and build time) small.
#include <cstring>

#include "core/backend.h"
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

// dst[i0 + i1*dst_s1 + b*dst_sb] = src[i0*src_s0 + i1 + b*src_sb]: a batch of 2-D
// transposes through 32x32 shared-memory tiles, so reads and writes both coalesce.
template <class B>
__global__ void __launch_bounds__(256) transpose_tiles(int64_t n0, int64_t n1, int64_t dst_s1, int64_t dst_sb,
                                                       int64_t src_s0, int64_t src_sb, B* __restrict__ dst,
                                                       const B* __restrict__ src) {
  __shared__ B tile[32][33];
  const int64_t i0_base = static_cast<int64_t>(blockIdx.x) * 32, i1_base = static_cast<int64_t>(blockIdx.y) * 32;
  const B* s = src + blockIdx.z * src_sb;
  B* d = dst + blockIdx.z * dst_sb;
#pragma unroll
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int64_t i0 = i0_base + j, i1 = i1_base + threadIdx.x;
    if (i0 < n0 && i1 < n1) tile[j][threadIdx.x] = s[i0 * src_s0 + i1];
  }
  __syncthreads();
#pragma unroll
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int64_t i1 = i1_base + j, i0 = i0_base + threadIdx.x;
    if (i0 < n0 && i1 < n1) d[i0 + i1 * dst_s1] = tile[threadIdx.x][j];
  }
}

// A copy whose destination is contiguous along layout dim 0 while the source is
// contiguous along dim 1 (t.transpose(...).contiguous()), batched over a dim 2.
bool try_transpose(const Tensor& dst, const Tensor& src) {
  const Tensor* ops[2] = {&dst, &src};
  StridedLayout<2> L;
  if (!make_layout(dst.shape(), ops, L) || L.ndim < 2 || L.ndim > 3) return false;
  if (L.strides[0][0] != 1 || L.strides[1][1] != 1 || L.strides[1][0] == 1) return false;
  const int64_t nb = L.ndim == 3 ? L.sizes[2] : 1;
  const int64_t gy = (L.sizes[1] + 31) / 32;
  if (nb > 65535 || gy > 65535) return false;
  const dim3 grid(static_cast<unsigned>((L.sizes[0] + 31) / 32), static_cast<unsigned>(gy), static_cast<unsigned>(nb));
  dispatch_bits(dst.itemsize(), [&](auto tag) {
    using B = typename decltype(tag)::type;
    transpose_tiles<B><<<grid, dim3(32, 8), 0, current_stream()>>>(
        L.sizes[0], L.sizes[1], L.strides[0][1], L.ndim == 3 ? L.strides[0][2] : 0, L.strides[1][0],
        L.ndim == 3 ? L.strides[1][2] : 0, static_cast<B*>(dst.data_ptr()), static_cast<const B*>(src.data_ptr()));
  });
  KILN_CUDA_CHECK_LAUNCH();
  return true;
}

// Casts to float8_e4m3fn, 16 elements a thread: when no element of the group
// exceeds 448 in magnitude (nor is NaN), Hopper's paired cvt.satfinite rounds
// two at a time and nothing else needs checking; other groups take the
// per-element rule. The per-element path alone is issue-bound at ~80% of the
// copy bandwidth on the H200; this one runs at the copy rate.
template <class S, bool kSaturate>
__global__ void __launch_bounds__(kThreads) cast_to_e4m3(int64_t groups, const S* __restrict__ in,
                                                         uint8_t* __restrict__ out) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g >= groups) return;
  constexpr int kPer = 16 / sizeof(S);  // elements per 16-byte load
  float f[16];
#pragma unroll
  for (int c = 0; c < 16 / kPer; ++c) {
    const Pack<S, kPer> p = reinterpret_cast<const Pack<S, kPer>*>(in + g * 16)[c];
#pragma unroll
    for (int k = 0; k < kPer; ++k) f[c * kPer + k] = static_cast<float>(p.v[k]);
  }
  Pack<uint8_t, 16> y;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t largest = 0;
#pragma unroll
  for (int k = 0; k < 16; ++k) largest = ::max(largest, __float_as_uint(f[k]) & 0x7fffffffu);
  if (largest <= 0x43e00000u) {  // |x| <= 448 everywhere: no overflow, no NaN
#pragma unroll
    for (int k = 0; k < 16; k += 2) {
      uint16_t two;
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(two) : "f"(f[k + 1]), "f"(f[k]));
      y.v[k] = static_cast<uint8_t>(two & 0xffu);
      y.v[k + 1] = static_cast<uint8_t>(two >> 8);
    }
    reinterpret_cast<Pack<uint8_t, 16>*>(out)[g] = y;
    return;
  }
#endif
#pragma unroll
  for (int k = 0; k < 16; ++k) y.v[k] = bits::e4m3fn_from_f32(f[k], kSaturate);
  reinterpret_cast<Pack<uint8_t, 16>*>(out)[g] = y;
}

// The fast e4m3 cast for contiguous, 16-byte aligned float32/float16/bfloat16
// data whose length is a multiple of 16; false when it does not apply.
template <class S>
bool try_cast_to_e4m3(const Tensor& d, const Tensor& s, bool saturate) {
  if (s.numel() % 16 != 0 || !aligned16(s.data_ptr()) || !aligned16(d.data_ptr())) return false;
  const int64_t groups = s.numel() / 16;
  if (groups == 0) return true;
  const auto* in = static_cast<const S*>(s.data_ptr());
  auto* out = static_cast<uint8_t*>(d.data_ptr());
  const unsigned grid = grid_all(groups, kThreads);
  if (saturate) cast_to_e4m3<S, true><<<grid, kThreads, 0, current_stream()>>>(groups, in, out);
  else cast_to_e4m3<S, false><<<grid, kThreads, 0, current_stream()>>>(groups, in, out);
  KILN_CUDA_CHECK_LAUNCH();
  return true;
}

void raw_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape() &&
      src.strides() == dst.strides()) {
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                    current_stream()));
    return;
  }
  if (try_transpose(dst, src)) return;
  dispatch_bits(dst.itemsize(), [&](auto tag) {
    using B = typename decltype(tag)::type;
    launch_map1<B, B>(dst, src, Identity{});
  });
}

}  // namespace

namespace {
struct RealPart {
  __device__ float operator()(Complex64 z) const { return z.re; }
};
struct ToComplex {
  __device__ Complex64 operator()(float x) const { return {x, 0.0f}; }
};

// complex64 <-> anything goes through float32, as torch: to a real dtype keeps
// the real part, from one gives a zero imaginary part.
void complex_cast(const Tensor& dst, const Tensor& src, bool saturate) {
  if (src.dtype() == DType::Complex64) {
    Tensor re = Tensor::empty(src.shape(), DType::Float32, src.device());
    launch_flat1<float, Complex64>(re, src.contiguous(), RealPart{});
    cuda_backend::copy(dst, re, saturate);
  } else {
    Tensor x = Tensor::empty(src.shape(), DType::Float32, src.device());
    cuda_backend::copy(x, src, saturate);
    Tensor z = dst.is_contiguous() ? dst : Tensor::empty(dst.shape(), DType::Complex64, dst.device());
    launch_flat1<Complex64, float>(z, x, ToComplex{});
    if (!z.is_alias_of(dst)) raw_copy(dst, z);
  }
}
}  // namespace

void copy(const Tensor& dst, const Tensor& src, bool saturate) {
  if (dst.dtype() == src.dtype()) return raw_copy(dst, src);
  if (dst.dtype() == DType::Complex64 || src.dtype() == DType::Complex64) return complex_cast(dst, src, saturate);
  // flat cast needs both contiguous with the same shape (no broadcast)
  const bool src_flat = src.is_contiguous() && storage_span(src.shape(), src.strides()) == src.numel();
  Tensor s = src_flat ? src : src.contiguous();
  Tensor d = dst.is_contiguous() ? dst : Tensor::empty(dst.shape(), dst.dtype(), dst.device());
  detail::dispatch_real(d.dtype(), "copy", [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    detail::dispatch_real(s.dtype(), "copy", [&](auto stag) {
      using S = typename decltype(stag)::type;
      if constexpr (std::is_same_v<D, Float8_e4m3fn> &&
                    (std::is_same_v<S, float> || std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>)) {
        if (try_cast_to_e4m3<S>(d, s, saturate)) return;
      }
      launch_flat1<D, S>(d, s, CastFn<D, S>{saturate});
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
