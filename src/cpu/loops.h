// The CPU's strided loop: splits an elementwise layout into runs along the
// innermost dim and hands each run to a kernel, threaded with OpenMP.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/layout.h"
#include "kiln/error.h"

namespace kiln::cpu {

// Below this many elements a loop stays on one thread (thread start-up costs more).
inline constexpr int64_t kParallelGrain = 32768;

// fn(begin, end) over [0, n) in chunks of at least `grain`, in parallel.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= grain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, omp_get_max_threads() * 4);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e) fn(b, e);
  }
}

// fn(begin, end) over [0, n) in blocks of `block`: each thread walks a contiguous
// share of the blocks front to back, and one that finishes early takes blocks from
// the back of the share with the most left. For loops that stream memory once (a
// decode linear's weights): each share stays one stream, and a core that runs
// slower (on a VM, one whose host core is busy) no longer sets the pace of all.
template <class F>
void parallel_for_balanced(int64_t n, int64_t block, F&& fn) {
  const int64_t blocks = block > 0 ? (n + block - 1) / block : 0;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), blocks));
  if (threads <= 1 || omp_in_parallel()) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  // a share's blocks left, [front, back), in one word, so that its owner (at the
  // front) and a thief (at the back) each claim with one compare-and-swap
  struct alignas(64) Share {
    std::atomic<uint64_t> range;
  };
  const auto pack = [](int64_t front, int64_t back) { return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back); };
  std::vector<Share> shares(threads);
  for (int t = 0; t < threads; ++t) shares[t].range = pack(blocks * t / threads, blocks * (t + 1) / threads);
  const auto claim = [&](Share& s, bool from_front, int64_t& got) {
    uint64_t r = s.range.load();
    for (;;) {
      const int64_t front = static_cast<int64_t>(r >> 32), back = static_cast<int64_t>(r & 0xffffffffu);
      if (front >= back) return false;
      got = from_front ? front : back - 1;
      if (s.range.compare_exchange_weak(r, from_front ? pack(front + 1, back) : pack(front, back - 1))) return true;
    }
  };
  const auto run = [&](int64_t b) { fn(b * block, std::min(n, (b + 1) * block)); };
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    int64_t b;
    while (claim(shares[t], true, b)) run(b);
    for (;;) {  // steal from the share with the most blocks left
      int victim = -1;
      int64_t most = 0;
      for (int v = 0; v < threads; ++v) {
        const uint64_t r = shares[v].range.load();
        const int64_t left = static_cast<int64_t>(r & 0xffffffffu) - static_cast<int64_t>(r >> 32);
        if (left > most) most = left, victim = v;
      }
      if (victim < 0) break;
      if (claim(shares[victim], false, b)) run(b);
    }
  }
}

// fn(off, inner_strides, count): `count` elements whose first element sits at
// element offsets `off` (one per operand), stepping by `inner_strides`. Both
// arrays are the calling thread's own locals: shared with the parallel region,
// the strides could be aliased by a kernel's byte-wide (int8, bool) stores and
// were reloaded every element (int8 abs of 4M: 3.7 ms against 0.1).
template <int N, class F>
void for_each_run(const StridedLayout<N>& L, F&& fn) {
  if (L.numel == 0) return;
  int64_t zero_strides[N] = {};
  if (L.ndim == 0) {
    int64_t off[N] = {};
    fn(off, zero_strides, int64_t{1});
    return;
  }
  const int64_t run = L.sizes[0];
  const int64_t runs = L.numel / run;
  if (runs == 1) {  // one long run: split it
    parallel_for(run, kParallelGrain, [&](int64_t b, int64_t e) {
      int64_t off[N], inner[N];
      for (int k = 0; k < N; ++k) inner[k] = L.strides[k][0], off[k] = b * inner[k];
      fn(off, inner, e - b);
    });
    return;
  }
  parallel_for(runs, std::max<int64_t>(1, kParallelGrain / run), [&](int64_t b, int64_t e) {
    int64_t inner[N];
    for (int k = 0; k < N; ++k) inner[k] = L.strides[k][0];
    for (int64_t r = b; r < e; ++r) {
      int64_t off[N] = {};
      int64_t rem = r;
      for (int d = 1; d < L.ndim; ++d) {
        const int64_t idx = rem % L.sizes[d];
        rem /= L.sizes[d];
        for (int k = 0; k < N; ++k) off[k] += idx * L.strides[k][d];
      }
      fn(off, inner, run);
    }
  });
}

template <int N>
StridedLayout<N> layout_of(const Tensor* const (&ops)[N]) {
  StridedLayout<N> L;
  if (!make_layout(ops[0]->shape(), ops, L)) throw Error("cpu: tensors with more than 16 dims that cannot be merged are not supported");
  return L;
}

}  // namespace kiln::cpu
