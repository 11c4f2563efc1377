// CUDA reductions over the [M kept, R reduced] view built by the front door.
//
// Rows path (reduced elements contiguous): 32 or 256 threads per row, 16-byte
// loads, warp-shuffle then shared-memory reduction. Columns path (kept elements
// contiguous): a thread per output walks the reduced index, coalesced across
// the warp. Either splits R across blocks when M alone cannot fill the GPU;
// the partials are combined by a second small kernel. Anything else is made
// contiguous first.
#include <cmath>
#include <limits>

#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {

template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<detail::compute_t<T>>, float, detail::compute_t<T>>;

template <class A>
struct AccIdx {
  A v;
  int64_t i;  // index of the extreme for max/min; -1 = nothing seen yet
};

template <class A>
__device__ AccIdx<A> identity(ReduceOp op) {
  if (op == ReduceOp::Prod) return {A(1), 0};
  return {A(0), op == ReduceOp::Max || op == ReduceOp::Min ? int64_t(-1) : int64_t(0)};
}

template <class A>
__device__ AccIdx<A> combine(ReduceOp op, AccIdx<A> x, AccIdx<A> y) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return {static_cast<A>(x.v + y.v), 0};
    case ReduceOp::Prod: return {static_cast<A>(x.v * y.v), 0};
    default: break;
  }
  if (x.i < 0) return y;
  if (y.i < 0) return x;
  const bool xn = math::is_nan(x.v), yn = math::is_nan(y.v);
  if (xn || yn) {
    if (xn && yn) return x.i <= y.i ? x : y;
    return xn ? x : y;  // NaN wins, as torch.max
  }
  if (x.v == y.v) return x.i <= y.i ? x : y;  // first index among equals
  const bool y_better = op == ReduceOp::Max ? y.v > x.v : y.v < x.v;
  return y_better ? y : x;
}

template <class A>
__device__ AccIdx<A> warp_reduce(ReduceOp op, AccIdx<A> a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    AccIdx<A> other;
    using W = std::conditional_t<(sizeof(A) < 4), int, A>;  // shuffles take 32 bits or more
    other.v = static_cast<A>(__shfl_down_sync(0xffffffffu, static_cast<W>(a.v), o));
    other.i = __shfl_down_sync(0xffffffffu, a.i, o);
    a = combine(op, a, other);
  }
  return a;
}

template <class T, class A>
__device__ void finish(ReduceOp op, AccIdx<A> a, float scale, T* out, int64_t* out_idx, int64_t m) {
  if (op == ReduceOp::Mean) a.v = static_cast<A>(a.v * scale);
  if constexpr (std::is_floating_point_v<A>) out[m] = T(static_cast<float>(a.v));
  else out[m] = static_cast<T>(a.v);
  if (out_idx) out_idx[m] = a.i;
}

struct Work {
  ReduceOp op;
  int64_t M, R, splits, chunk;
  float scale;
};

// TPR threads per row; blockDim.x = 256 covers 256 / TPR rows.
template <class T, int V, int TPR>
__global__ void reduce_rows(Work w, StridedLayout<1> rows, const T* __restrict__ in, T* out, int64_t* out_idx,
                            AccIdx<acc_t<T>>* partial) {
  using A = acc_t<T>;
  constexpr int kRowsPerBlock = 256 / TPR;
  const int lane = threadIdx.x % TPR;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  const int64_t split = blockIdx.y;
  AccIdx<A> acc = identity<A>(w.op);
  if (m < w.M) {
    int64_t off[1];
    rows.offsets(m, off);
    const T* row = in + off[0];
    const int64_t begin = split * w.chunk, end = ::min(w.R, begin + w.chunk);
    for (int64_t r = begin + lane * V; r < end; r += TPR * V) {
      if constexpr (V > 1) {
        const Pack<T, V> p = *reinterpret_cast<const Pack<T, V>*>(row + r);
#pragma unroll
        for (int k = 0; k < V; ++k) acc = combine(w.op, acc, AccIdx<A>{static_cast<A>(p.v[k]), r + k});
      } else {
        acc = combine(w.op, acc, AccIdx<A>{static_cast<A>(row[r]), r});
      }
    }
  }
  acc = warp_reduce(w.op, acc);
  if constexpr (TPR == 256) {
    __shared__ AccIdx<A> warp_acc[8];
    if (threadIdx.x % 32 == 0) warp_acc[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x >= 32) return;
    acc = threadIdx.x < 8 ? warp_acc[threadIdx.x] : identity<A>(w.op);
    acc = warp_reduce(w.op, acc);
  }
  if (lane != 0 || m >= w.M) return;
  if (w.splits == 1) finish(w.op, acc, w.scale, out, out_idx, m);
  else partial[m * w.splits + split] = acc;
}

// A thread per output m; kept elements are contiguous, the reduced index is strided.
template <class T>
__global__ void reduce_cols(Work w, StridedLayout<1> red, const T* __restrict__ in, T* out, int64_t* out_idx,
                            AccIdx<acc_t<T>>* partial) {
  using A = acc_t<T>;
  const int64_t m = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (m >= w.M) return;
  const int64_t split = blockIdx.y;
  const int64_t begin = split * w.chunk, end = ::min(w.R, begin + w.chunk);
  AccIdx<A> acc = identity<A>(w.op);
  for (int64_t r = begin; r < end; ++r) {
    int64_t off[1];
    red.offsets(r, off);
    acc = combine(w.op, acc, AccIdx<A>{static_cast<A>(in[off[0] + m]), r});
  }
  if (w.splits == 1) finish(w.op, acc, w.scale, out, out_idx, m);
  else partial[m * w.splits + split] = acc;
}

template <class T>
__global__ void combine_splits(Work w, const AccIdx<acc_t<T>>* partial, T* out, int64_t* out_idx) {
  using A = acc_t<T>;
  const int64_t m = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (m >= w.M) return;
  AccIdx<A> acc = identity<A>(w.op);
  for (int64_t s = 0; s < w.splits; ++s) acc = combine(w.op, acc, partial[m * w.splits + s]);
  finish(w.op, acc, w.scale, out, out_idx, m);
}

Tensor sub_view(const Tensor& in, size_t begin, size_t end) {
  Shape shape(in.shape().begin() + begin, in.shape().begin() + end);
  Shape strides(in.strides().begin() + begin, in.strides().begin() + end);
  return Tensor(in.storage(), shape, strides, in.storage_offset(), in.dtype());
}

StridedLayout<1> layout1(const Tensor& t) {
  const Tensor* ops[1] = {&t};
  return layout_or_throw(ops);
}

bool unit_stride(const StridedLayout<1>& L) { return L.ndim == 0 || (L.ndim == 1 && L.strides[0][0] == 1); }

template <class T>
void reduce_typed(const ReduceArgs& args) {
  using A = acc_t<T>;
  const size_t nk = static_cast<size_t>(args.num_kept_dims);
  Tensor in = args.in;
  auto kept = layout1(sub_view(in, 0, nk));
  auto red = layout1(sub_view(in, nk, in.dim()));
  const bool cols_ok = args.M > 1 && kept.ndim == 1 && kept.strides[0][0] == 1;
  if (!unit_stride(red) && !cols_ok) {
    in = in.contiguous();
    kept = layout1(sub_view(in, 0, nk));
    red = layout1(sub_view(in, nk, in.dim()));
  }
  const bool rows_path = unit_stride(red);
  Work w{args.op, args.M, args.R, 1, args.R, args.op == ReduceOp::Mean ? 1.0f / static_cast<float>(args.R) : 1.0f};
  const int64_t target_blocks = static_cast<int64_t>(sm_count()) * 4;
  cudaStream_t s = current_stream();
  T* out = args.out.data<T>();
  int64_t* out_idx = args.out_index.defined() ? args.out_index.data<int64_t>() : nullptr;
  const T* x = in.data<T>();
  constexpr int V = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;

  const int tpr = args.R <= 2048 ? 32 : 256;
  const int64_t base_blocks = rows_path ? (args.M + (256 / tpr) - 1) / (256 / tpr) : (args.M + 255) / 256;
  const int64_t min_chunk = rows_path ? 4096 : 64;
  if (base_blocks < target_blocks && args.R > 2 * min_chunk) {
    w.splits = std::min<int64_t>((target_blocks + base_blocks - 1) / base_blocks, (args.R + min_chunk - 1) / min_chunk);
    w.splits = std::min<int64_t>(w.splits, 65535);
  }
  w.chunk = (args.R + w.splits - 1) / w.splits;
  if (rows_path) w.chunk = (w.chunk + V - 1) / V * V;  // keeps vector loads aligned within a row
  w.splits = (args.R + w.chunk - 1) / std::max<int64_t>(w.chunk, 1);
  if (w.splits < 1) w.splits = 1;

  Tensor partial_buf;
  AccIdx<A>* partial = nullptr;
  if (w.splits > 1) {
    partial_buf = Tensor::empty({static_cast<int64_t>(args.M * w.splits * sizeof(AccIdx<A>))}, DType::UInt8, in.device());
    partial = static_cast<AccIdx<A>*>(partial_buf.data_ptr());
  }
  const dim3 grid(static_cast<unsigned>(base_blocks), static_cast<unsigned>(w.splits));
  if (rows_path) {
    bool vec = aligned16(x) && args.R % V == 0;
    for (int d = 0; d < kept.ndim; ++d) vec = vec && kept.strides[0][d] % V == 0;
    if (tpr == 32) {
      if (vec) reduce_rows<T, V, 32><<<grid, 256, 0, s>>>(w, kept, x, out, out_idx, partial);
      else reduce_rows<T, 1, 32><<<grid, 256, 0, s>>>(w, kept, x, out, out_idx, partial);
    } else {
      if (vec) reduce_rows<T, V, 256><<<grid, 256, 0, s>>>(w, kept, x, out, out_idx, partial);
      else reduce_rows<T, 1, 256><<<grid, 256, 0, s>>>(w, kept, x, out, out_idx, partial);
    }
  } else {
    reduce_cols<T><<<grid, 256, 0, s>>>(w, red, x, out, out_idx, partial);
  }
  KILN_CUDA_CHECK_LAUNCH();
  if (w.splits > 1) {
    combine_splits<T><<<static_cast<unsigned>((args.M + 255) / 256), 256, 0, s>>>(w, partial, out, out_idx);
    KILN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void reduce(const ReduceArgs& args) {
  if (args.R == 0) {  // empty sum/prod/mean: the identity (mean gives NaN, as torch)
    const double v = args.op == ReduceOp::Prod ? 1.0 : args.op == ReduceOp::Mean ? NAN : 0.0;
    args.out.fill_(v);
    return;
  }
  detail::dispatch_arith(args.in.dtype(), op_name(args.op), [&](auto tag) {
    reduce_typed<typename decltype(tag)::type>(args);
  });
}

}  // namespace kiln::cuda_backend
