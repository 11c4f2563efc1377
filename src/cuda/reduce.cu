// CUDA reductions over the [M kept, R reduced] view built by the front door.
//
// The op is a template argument, and the index of the extreme is carried only
// when the caller asked for it (max/min with dim, argmax, argmin), so sum and
// amax move nothing but values. Two paths:
//  - rows (reduced elements contiguous): TPR = 32 or 256 threads per row,
//    16-byte loads with kUnroll vectors in flight, warp shuffles, then shared
//    memory across warps;
//  - columns (kept elements contiguous, reduced index strided, as sum(dim=0)):
//    a 32 x 8 block, each thread V adjacent outputs with vector loads, the 8
//    row groups combined in shared memory.
// Either splits R across blocks when M alone cannot fill the GPU (rows: the
// splits interleave; columns: each takes a contiguous chunk). The blocks
// write partials, and the last of a column's blocks to finish (a ticket counter
// per blockIdx.x, which that block resets) folds them, so one kernel does the
// whole reduction; while a graph is being captured a second small kernel folds
// them instead. Anything else is made contiguous first.
// The kernels are chained launches (chained_launch.cuh): a reduction's blocks
// become resident while the kernel before it drains, which saves about 0.8 us a
// call, 2% of a 128 MB reduction.
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "core/dispatch.h"
#include "core/elementwise_math.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {

template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<detail::compute_t<T>>, float, detail::compute_t<T>>;

template <class A, bool IDX>
struct Acc {
  A v;
};
template <class A>
struct Acc<A, true> {
  A v;
  int64_t i;
};

template <class A>
__device__ __forceinline__ A lowest() {
  if constexpr (std::is_floating_point_v<A>) return -INFINITY;
  else return std::numeric_limits<A>::lowest();
}
template <class A>
__device__ __forceinline__ A highest() {
  if constexpr (std::is_floating_point_v<A>) return INFINITY;
  else return std::numeric_limits<A>::max();
}

template <ReduceOp OP, class A, bool IDX>
__device__ __forceinline__ Acc<A, IDX> identity() {
  Acc<A, IDX> a;
  a.v = OP == ReduceOp::Sum ? A(0) : OP == ReduceOp::Prod ? A(1) : OP == ReduceOp::Max ? lowest<A>() : highest<A>();
  if constexpr (IDX) a.i = INT64_MAX;  // loses every tie against a real element
  return a;
}

template <ReduceOp OP, class A>
__device__ __forceinline__ bool better(A y, A x) {
  return OP == ReduceOp::Max ? y > x : y < x;
}

// NaN wins (torch.max propagates it); among equals the first index wins.
template <ReduceOp OP, class A, bool IDX>
__device__ __forceinline__ Acc<A, IDX> combine(Acc<A, IDX> x, Acc<A, IDX> y) {
  if constexpr (OP == ReduceOp::Sum) {
    return {static_cast<A>(x.v + y.v)};
  } else if constexpr (OP == ReduceOp::Prod) {
    return {static_cast<A>(x.v * y.v)};
  } else if constexpr (!IDX) {
    return (math::is_nan(y.v) || better<OP>(y.v, x.v)) ? y : x;
  } else {
    const bool xn = math::is_nan(x.v), yn = math::is_nan(y.v);
    bool take_y;
    if (xn || yn) take_y = yn && (!xn || y.i < x.i);
    else take_y = better<OP>(y.v, x.v) || (y.v == x.v && y.i < x.i);
    return take_y ? y : x;
  }
}

template <class A, bool IDX>
__device__ __forceinline__ Acc<A, IDX> make(A v, int64_t i) {
  if constexpr (IDX) return {v, i};
  else return {v};
}

template <ReduceOp OP, class A, bool IDX>
__device__ __forceinline__ Acc<A, IDX> warp_reduce(Acc<A, IDX> a) {
  using W = std::conditional_t<(sizeof(A) < 4), int, A>;  // shuffles take 32 bits or more
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Acc<A, IDX> other;
    other.v = static_cast<A>(__shfl_down_sync(0xffffffffu, static_cast<W>(a.v), o));
    if constexpr (IDX) other.i = __shfl_down_sync(0xffffffffu, a.i, o);
    a = combine<OP>(a, other);
  }
  return a;
}

struct Work {
  int64_t M, R, splits, chunk;
  float scale;  // 1/R for mean
};

template <class T, class A, bool IDX>
__device__ __forceinline__ void finish(Acc<A, IDX> a, float scale, T* out, int64_t* out_idx, int64_t m) {
  if constexpr (std::is_floating_point_v<A>) out[m] = T(static_cast<float>(a.v) * scale);
  else out[m] = static_cast<T>(a.v);
  if constexpr (IDX) out_idx[m] = a.i;
}

// partial[s * M + m] for s = first, first + step, ... < splits, folded with four
// loads in flight: the fold runs in one block at the very end of the kernel, so
// its latency is the tail every reduction pays.
template <ReduceOp OP, class A, bool IDX>
__device__ __forceinline__ Acc<A, IDX> fold_partials(const Acc<A, IDX>* partial, int64_t splits, int64_t M, int64_t m,
                                                     int64_t first, int64_t step) {
  Acc<A, IDX> acc = identity<OP, A, IDX>();
  int64_t s = first;
  for (; s + 3 * step < splits; s += 4 * step) {
    Acc<A, IDX> p[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) p[u] = partial[(s + u * step) * M + m];
#pragma unroll
    for (int u = 0; u < 4; ++u) acc = combine<OP>(acc, p[u]);
  }
  for (; s < splits; s += step) acc = combine<OP>(acc, partial[s * M + m]);
  return acc;
}

// In every thread: whether this block is the last of the gridDim.y blocks of
// its column to arrive, after which the partials of all of them are visible.
__device__ __forceinline__ bool last_of_column(unsigned* tickets) {
  __shared__ bool last;
  __threadfence();  // this thread's partials before the ticket
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
    if (last) tickets[blockIdx.x] = 0;  // ready for the next reduction on this stream
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// Joins the TPR threads of each row; the result is valid in lane 0 of the row.
template <ReduceOp OP, int TPR, class A, bool IDX>
__device__ __forceinline__ Acc<A, IDX> join_row(Acc<A, IDX> acc) {
  acc = warp_reduce<OP>(acc);
  if constexpr (TPR == 256) {
    __shared__ Acc<A, IDX> warp_acc[8];
    __syncthreads();  // an earlier join's readers are done
    if (threadIdx.x % 32 == 0) warp_acc[threadIdx.x / 32] = acc;
    __syncthreads();
    acc = threadIdx.x < 8 ? warp_acc[threadIdx.x] : identity<OP, A, IDX>();
    if (threadIdx.x < 32) acc = warp_reduce<OP>(acc);
  }
  return acc;
}

// Blocks of 256 that must fit on an SM at once. 8 caps the registers at 32: for
// a warp per row of a 2-byte type the compiler takes 38, which runs 2048 blocks
// in 2.6 waves rather than 1.9 (amax of [16384, 4096] bf16 on the H200: 36.4 ->
// 35.1 us), and it needs no spill there. Elsewhere the cap spills and loses (sum
// of [16384, 4096] f32 over dim=-1: 62.6 -> 67.2 us), so the compiler chooses.
template <class T, int TPR, bool IDX>
inline constexpr int kMinBlocks = sizeof(T) == 2 && TPR == 32 && !IDX ? 8 : 1;

// TPR threads per row; a block of 256 covers 256 / TPR rows.
template <class T, ReduceOp OP, bool IDX, int V, int TPR>
__global__ void __launch_bounds__(256, (kMinBlocks<T, TPR, IDX>))
    reduce_rows(Work w, StridedLayout<1> rows, const T* __restrict__ in, T* out, int64_t* out_idx,
                Acc<acc_t<T>, IDX>* partial, unsigned* tickets) {
  using A = acc_t<T>;
  chain_wait();
  chain_release();
  constexpr int kRowsPerBlock = 256 / TPR;
  const int lane = threadIdx.x % TPR;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / TPR;
  const int64_t split = blockIdx.y;
  Acc<A, IDX> acc = identity<OP, A, IDX>();
  if (m < w.M) {
    int64_t off[1];
    rows.offsets(m, off);
    const T* row = in + off[0];
    // the splits of a row interleave tiles of TPR vectors (split s takes tiles s,
    // s + splits, ...): on the H200 a sum of 64M bf16 over one row ran at 98% of
    // the copy bandwidth so, against 93-95% with a contiguous chunk per split
    constexpr int64_t kStep = static_cast<int64_t>(TPR) * V;
    const int64_t stride = w.splits * kStep;
    const int64_t first = split * kStep + lane * V;
    const int64_t count = first < w.R ? (w.R - first + stride - 1) / stride : 0;  // vectors of this thread
    // a pointer walk, with no 64-bit index products in the loop
    const T* p = row + first;
    int64_t i = 0, r = first;  // r: the index of p's first element, for argmax and argmin
    // kUnroll vectors in flight per thread, then the remainder one at a time
    for (; i + kUnroll <= count; i += kUnroll, p += kUnroll * stride, r += kUnroll * stride) {
      Pack<T, V> v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = *reinterpret_cast<const Pack<T, V>*>(p + u * stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int k = 0; k < V; ++k) acc = combine<OP>(acc, make<A, IDX>(static_cast<A>(v[u].v[k]), r + u * stride + k));
    }
    for (; i < count; ++i, p += stride, r += stride) {
      const Pack<T, V> v = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
      for (int k = 0; k < V; ++k) acc = combine<OP>(acc, make<A, IDX>(static_cast<A>(v.v[k]), r + k));
    }
  }
  acc = join_row<OP, TPR>(acc);
  const bool owner = lane == 0 && m < w.M;
  if (w.splits == 1) {
    if (owner) finish(acc, w.scale, out, out_idx, m);
    return;
  }
  if (owner) partial[split * w.M + m] = acc;
  if (tickets == nullptr || !last_of_column(tickets)) return;
  acc = m < w.M ? fold_partials<OP>(partial, w.splits, w.M, m, lane, TPR) : identity<OP, A, IDX>();
  acc = join_row<OP, TPR>(acc);
  if (owner) finish(acc, w.scale, out, out_idx, m);
}

// Kept elements contiguous: threadIdx.x covers V adjacent outputs each,
// threadIdx.y (8) interleaves the reduced index; shared memory joins the 8.
template <class T, ReduceOp OP, bool IDX, int V>
__global__ void __launch_bounds__(256) reduce_cols(Work w, StridedLayout<1> red, const T* __restrict__ in, T* out,
                                                   int64_t* out_idx, Acc<acc_t<T>, IDX>* partial, unsigned* tickets) {
  using A = acc_t<T>;
  chain_wait();
  chain_release();
  const int64_t m0 = (static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x) * V;
  const int64_t split = blockIdx.y;
  const int64_t begin = split * w.chunk, end = ::min(w.R, begin + w.chunk);
  Acc<A, IDX> acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = identity<OP, A, IDX>();
  const auto load_at = [&](const T* q) {
    if constexpr (V > 1) return *reinterpret_cast<const Pack<T, V>*>(q);
    else return Pack<T, 1>{{*q}};
  };
  const auto load = [&](int64_t off) { return load_at(in + off + m0); };
  const auto add = [&](const Pack<T, V>& p, int64_t r) {
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = combine<OP>(acc[k], make<A, IDX>(static_cast<A>(p.v[k]), r));
  };
  if (m0 < w.M) {
    int64_t r = begin + threadIdx.y;
    if (red.ndim <= 1) {
      // one reduced stride: kColUnroll independent loads in flight per thread, by
      // a pointer walk as in reduce_rows
      constexpr int kColUnroll = 4;
      const int64_t rs = red.ndim == 1 ? red.strides[0][0] : 0, step = 8 * rs;
      const int64_t count = r < end ? (end - r + 7) / 8 : 0;
      const T* p = in + m0 + r * rs;
      int64_t i = 0;
      for (; i + kColUnroll <= count; i += kColUnroll, p += kColUnroll * step) {
        Pack<T, V> v[kColUnroll];
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) v[u] = load_at(p + u * step);
#pragma unroll
        for (int u = 0; u < kColUnroll; ++u) add(v[u], r + (i + u) * 8);
      }
      for (; i < count; ++i, p += step) add(load_at(p), r + i * 8);
    } else {
      for (; r < end; r += 8) {
        int64_t o[1];
        red.offsets(r, o);
        add(load(o[0]), r);
      }
    }
  }
  // joins the 8 row groups; the result is valid where threadIdx.y == 0
  __shared__ Acc<A, IDX> sh[8][32 * V];
  const auto join_y = [&] {
    __syncthreads();  // an earlier join's readers are done
#pragma unroll
    for (int k = 0; k < V; ++k) sh[threadIdx.y][threadIdx.x * V + k] = acc[k];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < V; ++k)
#pragma unroll
      for (int y = 1; y < 8; ++y) acc[k] = combine<OP>(acc[k], sh[y][threadIdx.x * V + k]);
  };
  const auto owns = [&](int k) { return threadIdx.y == 0 && m0 + k < w.M; };
  join_y();
  if (w.splits == 1) {
#pragma unroll
    for (int k = 0; k < V; ++k)
      if (owns(k)) finish(acc[k], w.scale, out, out_idx, m0 + k);
    return;
  }
#pragma unroll
  for (int k = 0; k < V; ++k)
    if (owns(k)) partial[split * w.M + m0 + k] = acc[k];
  if (tickets == nullptr || !last_of_column(tickets)) return;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    acc[k] = m0 + k < w.M ? fold_partials<OP>(partial, w.splits, w.M, m0 + k, threadIdx.y, 8) : identity<OP, A, IDX>();
  }
  join_y();
#pragma unroll
  for (int k = 0; k < V; ++k)
    if (owns(k)) finish(acc[k], w.scale, out, out_idx, m0 + k);
}

template <class T, ReduceOp OP, bool IDX>
__global__ void combine_splits(Work w, const Acc<acc_t<T>, IDX>* partial, T* out, int64_t* out_idx) {
  using A = acc_t<T>;
  chain_wait();
  chain_release();
  // a warp per output: lanes read the partials in parallel
  const int64_t m = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (m >= w.M) return;
  Acc<A, IDX> acc = fold_partials<OP>(partial, w.splits, w.M, m, lane, 32);
  acc = warp_reduce<OP>(acc);
  if (lane == 0) finish(acc, w.scale, out, out_idx, m);
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

// Ticket counters for last_of_column, one per column of blocks, zeroed once per
// (device, stream): reductions on one stream run one after another, and each
// last block resets its counter. nullptr while the stream is being captured
// (a graph may be replayed on another stream) or for more columns than kept.
unsigned* split_tickets(cudaStream_t stream, int64_t columns) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  KILN_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  // plan_splits splits only below its target, at most 8 blocks of 256 per SM
  const int64_t capacity = static_cast<int64_t>(sm_count()) * 8;
  if (capture != cudaStreamCaptureStatusNone || columns > capacity) return nullptr;
  static std::mutex mu;
  static std::map<std::pair<int, cudaStream_t>, unsigned*> tickets;
  std::lock_guard<std::mutex> lock(mu);
  unsigned*& t = tickets[{current_device(), stream}];
  if (t == nullptr) {
    KILN_CUDA_CHECK(cudaMalloc(&t, capacity * sizeof(unsigned)));
    KILN_CUDA_CHECK(cudaMemsetAsync(t, 0, capacity * sizeof(unsigned), stream));
  }
  return t;
}

// Splits R so that about `target` blocks run (the callers say why theirs);
// chunks stay multiples of `align`.
void plan_splits(Work& w, int64_t base_blocks, int64_t min_chunk, int64_t align, int64_t target) {
  w.splits = 1;
  if (base_blocks < target && w.R > 2 * min_chunk)
    w.splits = std::min<int64_t>({(target + base_blocks - 1) / base_blocks, (w.R + min_chunk - 1) / min_chunk, 65535});
  w.chunk = (w.R + w.splits - 1) / w.splits;
  w.chunk = (w.chunk + align - 1) / align * align;
  w.splits = std::max<int64_t>(1, (w.R + w.chunk - 1) / w.chunk);
}

template <class T, ReduceOp OP, bool IDX>
void reduce_typed(const ReduceArgs& args, float scale) {
  using A = acc_t<T>;
  using P = Acc<A, IDX>;
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
  Work w{args.M, args.R, 1, args.R, scale};
  cudaStream_t s = current_stream();
  T* out = args.out.data<T>();
  int64_t* out_idx = IDX ? args.out_index.data<int64_t>() : nullptr;
  const T* x = in.data<T>();
  constexpr int V = 16 / sizeof(T) > 0 ? static_cast<int>(16 / sizeof(T)) : 1;
  constexpr int VC = V > 4 ? 4 : V;  // columns path: keeps its shared memory under 48 KB

  Tensor partial_buf;
  auto alloc_partials = [&] {
    if (w.splits == 1) return static_cast<P*>(nullptr);
    partial_buf = Tensor::empty({static_cast<int64_t>(args.M * w.splits * sizeof(P))}, DType::UInt8, in.device());
    return static_cast<P*>(partial_buf.data_ptr());
  };

  unsigned* tickets = nullptr;  // null: combine_splits folds the partials
  if (rows_path) {
    // a warp per row up to 64 vectors per lane, else a block per row
    const int tpr = args.R <= 2048 * V ? 32 : 256;
    const int64_t base_blocks = (args.M + (256 / tpr) - 1) / (256 / tpr);
    bool vec = aligned16(x) && args.R % V == 0;
    for (int d = 0; d < kept.ndim; ++d) vec = vec && kept.strides[0][d] % V == 0;
    const auto kernel = tpr == 32 ? (vec ? reduce_rows<T, OP, IDX, V, 32> : reduce_rows<T, OP, IDX, 1, 32>)
                                  : (vec ? reduce_rows<T, OP, IDX, V, 256> : reduce_rows<T, OP, IDX, 1, 256>);
    // one wave of resident blocks: a partial second wave costs as much as the first
    plan_splits(w, base_blocks, 8192, V, resident_blocks(reinterpret_cast<const void*>(kernel), 256));
    // the same number of tiles for every split: 32768 tiles over 1056 splits would give
    // some 32 and most 31, and the whole wave waits for the 32s
    const int64_t tile = static_cast<int64_t>(tpr) * (vec ? V : 1), tiles = (args.R + tile - 1) / tile;
    const int64_t per_split = (tiles + w.splits - 1) / w.splits;
    w.splits = (tiles + per_split - 1) / per_split;
    P* partial = alloc_partials();
    if (w.splits > 1) tickets = split_tickets(s, base_blocks);
    const dim3 grid(static_cast<unsigned>(base_blocks), static_cast<unsigned>(w.splits));
    launch_chained(kernel, grid, 256, 0, w, kept, x, out, out_idx, partial, tickets);
  } else {
    bool vec = (reinterpret_cast<uintptr_t>(x) % (VC * sizeof(T))) == 0 && args.M % VC == 0;
    for (int d = 0; d < red.ndim; ++d) vec = vec && red.strides[0][d] % VC == 0;
    const int64_t per_block = 32 * (vec ? VC : 1);
    const int64_t base_blocks = (args.M + per_block - 1) / per_block;
    const auto kernel = vec ? reduce_cols<T, OP, IDX, VC> : reduce_cols<T, OP, IDX, 1>;
    // Few columns of blocks, split deep: about 2 blocks per SM, a third of what fits,
    // so that the next chained reduction's grid is resident beside this one and its
    // waiting blocks spread evenly (H200, sum(dim=0) of [16384, 4096] f32: 66.6 us,
    // against 76.0 at 1 per SM, 87.2 at 3, where the next grid no longer fits and
    // lands unevenly, and 71.2 at 8). Many columns: 8 per SM, 1.33 waves at the 6
    // that fit, which the shallow splits of a wide output want.
    const int64_t per_sm = base_blocks < sm_count() ? 2 : 8;
    plan_splits(w, base_blocks, 64, 1, static_cast<int64_t>(sm_count()) * per_sm);
    P* partial = alloc_partials();
    if (w.splits > 1) tickets = split_tickets(s, base_blocks);
    const dim3 grid(static_cast<unsigned>(base_blocks), static_cast<unsigned>(w.splits));
    launch_chained(kernel, grid, dim3(32, 8), 0, w, red, x, out, out_idx, partial, tickets);
  }
  KILN_CUDA_CHECK_LAUNCH();
  if (w.splits > 1 && tickets == nullptr) {
    launch_chained(combine_splits<T, OP, IDX>, static_cast<unsigned>((args.M * 32 + 255) / 256), 256, 0, w,
                   static_cast<const P*>(partial_buf.data_ptr()), out, out_idx);
    KILN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void reduce(const ReduceArgs& args) {
  if (args.M == 0) return;
  if (args.R == 0) {  // empty sum/prod/mean: the identity (mean gives NaN, as torch)
    const double v = args.op == ReduceOp::Prod ? 1.0 : args.op == ReduceOp::Mean ? NAN : 0.0;
    args.out.fill_(v);
    return;
  }
  const bool with_index = args.out_index.defined();
  const float scale = args.op == ReduceOp::Mean ? 1.0f / static_cast<float>(args.R) : 1.0f;
  detail::dispatch_arith(args.in.dtype(), op_name(args.op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (args.op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean: return reduce_typed<T, ReduceOp::Sum, false>(args, scale);
      case ReduceOp::Prod: return reduce_typed<T, ReduceOp::Prod, false>(args, scale);
      case ReduceOp::Max:
        return with_index ? reduce_typed<T, ReduceOp::Max, true>(args, scale)
                          : reduce_typed<T, ReduceOp::Max, false>(args, scale);
      case ReduceOp::Min:
        return with_index ? reduce_typed<T, ReduceOp::Min, true>(args, scale)
                          : reduce_typed<T, ReduceOp::Min, false>(args, scale);
    }
  });
}

}  // namespace kiln::cuda_backend
