// The memory ceilings that `kiln bench` and `kiln bench-decode` hold kernels to,
// defined once so that both commands measure the same thing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>

#include "kiln/tensor.h"

namespace kiln::tools {

// The wall-clock seconds of one call of f (f synchronises what it times).
template <class F>
double wall_seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The fastest of n calls of f, in seconds.
template <class F>
double fastest_seconds(int n, F&& f) {
  double best = 1e30;
  for (int i = 0; i < n; ++i) best = std::min(best, wall_seconds(f));
  return best;
}

// The last-level cache of this CPU (32 MiB where the C library cannot say): data
// that fits stays there across repeats, which no decode step sees.
int64_t llc_bytes();

// The CPU's read ceiling: an OR of every 64-bit word of a buffer of twice the
// last-level cache and at least 512 MiB, on every core, so that every repeat reads
// DRAM, as a decode step reads its weights (and writes almost nothing). A float32
// sum read at 26-30 GB/s where this reads 30-36 (2-core Zen 5 VM, December 2026),
// which let decode steps show 101-131% of "read". The copy ceiling counts a write
// per read, which a CPU streams faster than it reads (82 against 61 GB/s on a
// 2-core VM).
Tensor make_read_ceiling_input();
// Reads the input above once; its bytes are input.nbytes(). Returns the OR of its
// words, so that the reads cannot be left out.
uint64_t run_read_ceiling(const Tensor& input);

// How close a memory-bound run comes to the read ceiling on a shared machine:
// `pairs` times, the ceiling runs (the fastest of 3) and then `timed` (which
// returns the seconds it measured, for `bytes`); share is the median of
// (bytes / seconds) / (the ceiling's GB/s just before). On a 2-core VM the ceiling
// drifted between 22 and 65 GB/s within minutes, so a ratio of two measurements
// taken apart said more about the neighbours than about the kernel. The fastest
// of 3: a read during which a vCPU was descheduled reads at one core's speed and
// would set the bar too low (a decode step was seen streaming 37 GB/s beside a
// single sum at 25, when the ceiling was a sum).
struct ReadShare {
  double share = 0;      // median of the pairs' ratios
  double read_gbps = 0;  // median of the ceiling's runs
};
ReadShare share_of_read(const Tensor& ceiling_input, double bytes, int pairs, const std::function<double()>& timed);

}  // namespace kiln::tools
