// CUDA grouped_mm. The offsets stay on the GPU: the grid has one slot per
// possible (group, chunk of rows) pair, at most ceil(T / rows per chunk) +
// min(G, T) of them, and each block finds its pair with a warp scan over offs,
// so empty experts cost nothing and nothing waits for the host.
//
// 2-D x 3-D with k contiguous in a and b (weights stored [G, N, K], b their
// transpose): tensor-core tiles from mma.cuh. Few rows per group (decode) use
// one 16-row tile and 8 columns per block with the warps splitting K, for
// parallelism; many rows (prefill) use 64 x 32 tiles, so each weight column
// is read once per 64 rows. Anything else (float32, other layouts, k split by
// groups) runs a plain per-element kernel: right, not fast. fp8 e4m3fn weights:
// the matrix-vector and TMA kernels read them as they are; the others get a
// widened copy. Their scale multiplies each finished dot product.
// The kernels for half-precision inputs are in grouped_mm_gemv.cu (few rows a
// group) and grouped_mm_tiles.cu (many); here are the front door, the choice
// between them and the plain kernel.
#include "core/vector_rows.h"
#include "cuda/gemv.cuh"
#include "cuda/grouped_mm.cuh"

namespace kiln::cuda_backend {

namespace {

// Tensor-core paths by rows a group: tiles for prefill (about a tile of rows per
// expert), a matrix-vector product per row for decode (a row or none per expert),
// and one 16-row tile a block between the two.
void grouped_mma(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), G = s.offs.size(0);
  if (rows > 8 * G) grouped_tiles(s);
  else if (rows <= G) grouped_gemv(s);
  else grouped_rows(s);
}

// The plain kernel: one thread per output element.
template <class T, class W, class O>
__global__ void grouped_generic_kernel(bool k_by_group, int64_t total, int64_t M, int64_t N, int64_t K,
                                       const T* __restrict__ a, int64_t as0, int64_t as1, const W* __restrict__ b,
                                       int64_t bsg, int64_t bsk, int64_t bsn, const int32_t* __restrict__ offs, int G,
                                       O* __restrict__ out, ColumnScale scale) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int64_t n = e % N;
  float acc = 0.0f;
  if (k_by_group) {  // out [G, M, N]; a [M, Ktot], b [Ktot, N]
    const int64_t m = (e / N) % M;
    const int g = static_cast<int>(e / (N * M));
    int64_t k0, k1;
    group_rows(offs, g, K, k0, k1);
    for (int64_t k = k0; k < k1; ++k) acc += static_cast<float>(a[m * as0 + k * as1]) * static_cast<float>(b[k * bsk + n * bsn]);
  } else {  // out [M, N]; a [M, K], b [G, K, N]
    const int64_t r = e / N;
    int lo = 0, hi = G;  // first group whose end passes r
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (offs[mid] > r) hi = mid;
      else lo = mid + 1;
    }
    if (lo < G && (lo == 0 || offs[lo - 1] <= r)) {
      for (int64_t k = 0; k < K; ++k)
        acc += static_cast<float>(a[r * as0 + k * as1]) * static_cast<float>(b[lo * bsg + k * bsk + n * bsn]);
      acc *= scale(lo, n);
    }
  }
  out[e] = O(acc);
}

template <class T, class W, class O>
void grouped_generic(const GroupedMmArgs& s) {
  const bool by_k = s.k_by_group();
  const int64_t M = s.a.size(0), K = s.a.size(1), N = by_k ? s.b.size(1) : s.b.size(2);
  const int64_t bsg = by_k ? 0 : s.b.stride(0), bsk = s.b.stride(by_k ? 0 : 1), bsn = s.b.stride(by_k ? 1 : 2);
  const int64_t total = s.out.numel();
  grouped_generic_kernel<T, W, O><<<grid_all(total, 256), 256, 0, current_stream()>>>(
      by_k, total, M, N, K, s.a.data<T>(), s.a.stride(0), s.a.stride(1), s.b.data<W>(), bsg, bsk, bsn,
      s.offs.data<int32_t>(), static_cast<int>(s.offs.size(0)), s.out.data<O>(), column_scale(s));
  KILN_CUDA_CHECK_LAUNCH();
}

bool fits_mma(const GroupedMmArgs& s) {
  if (s.k_by_group() || s.a.dtype() == DType::Float32 || device_arch() < 80) return false;
  // a [T, K] and b [G, K, N] both with k contiguous, whole 16-byte chunks of k
  return (s.a.size(1) * static_cast<int64_t>(s.a.itemsize())) % 16 == 0 && rows_vector_aligned(s.a, 1) &&
         rows_vector_aligned(s.b, 1);
}

// fp8 weights [G, K, N] (k contiguous, whole 16-byte chunks) -> T, exactly (every
// e4m3 value is a bfloat16 and a float16): a thread per 16 weights.
template <class T>
__global__ void widen_experts_kernel(const Float8_e4m3fn* __restrict__ b, int64_t bsg, int64_t bsn, int64_t N,
                                     int64_t K, T* __restrict__ out, int64_t vectors) {
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (v >= vectors) return;
  const int64_t k = v % (K / 16) * 16, n = v / (K / 16) % N, g = v / (K / 16 * N);
  float f[16];
  gemv::widen_pack<Float8_e4m3fn>(*reinterpret_cast<const Pack<Float8_e4m3fn, 16>*>(b + g * bsg + n * bsn + k), f);
  Pack<T, 8> p[2];
#pragma unroll
  for (int i = 0; i < 16; ++i) p[i / 8].v[i % 8] = T(f[i]);
  Pack<T, 8>* dst = reinterpret_cast<Pack<T, 8>*>(out + (g * N + n) * K + k);
  dst[0] = p[0];
  dst[1] = p[1];
}

template <class T>
void grouped_mma_fp8(const GroupedMmArgs& s) {
  const int64_t rows = s.a.size(0), G = s.offs.size(0);
  if (rows <= G) return grouped_gemv(s);  // decode: reads fp8
  // Prefill on Hopper: the TMA tiles read fp8 and widen it in registers.
  if (rows > 8 * G && grouped_tiles_fit_tma(s)) return grouped_tiles(s);
  // Elsewhere: the experts widened to T once, then the tensor-core tiles with the scale in their epilogue.
  const int64_t K = s.b.size(1), N = s.b.size(2);
  Tensor wide = Tensor::empty({G, N, K}, s.a.dtype(), s.a.device());
  const int64_t vectors = G * N * K / 16;
  widen_experts_kernel<T><<<grid_all(vectors, 256), 256, 0, current_stream()>>>(
      s.b.data<Float8_e4m3fn>(), s.b.stride(0), s.b.stride(2), N, K, wide.data<T>(), vectors);
  KILN_CUDA_CHECK_LAUNCH();
  GroupedMmArgs widened = s;
  widened.b = wide.transpose(1, 2);
  grouped_mma(widened);
}

// Weights W: T, or float8_e4m3fn with s.b_scale.
template <class T, class W, class O>
void grouped_mm_typed(const GroupedMmArgs& s) {
  constexpr bool fp8 = std::is_same_v<W, Float8_e4m3fn>;
  if constexpr (!std::is_same_v<T, float>) {
    if (s.row_index.defined() || s.swiglu || s.combine_pos.defined())
      return grouped_gemv(s);  // moe_experts' fused decode
    if (fits_mma(s)) {
      if constexpr (fp8) return grouped_mma_fp8<T>(s);
      else return grouped_mma(s);
    }
  }
  grouped_generic<T, W, O>(s);
}

}  // namespace

void grouped_mm(const GroupedMmArgs& args) {
  detail::dispatch_float(args.a.dtype(), "grouped_mm", [&](auto tag) {
    with_weights_and_output(args, tag, [&](auto t, auto w, auto o) {
      grouped_mm_typed<typename decltype(t)::type, typename decltype(w)::type, typename decltype(o)::type>(args);
    });
  });
}

}  // namespace kiln::cuda_backend
