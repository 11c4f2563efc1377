// Strided iteration layouts shared by the CPU and CUDA elementwise kernels:
// the same struct is filled on the host and read by the kernel.
#pragma once

#include <cstdint>

#include "kiln/scalar_types.h"  // KILN_HD
#include "kiln/tensor.h"

namespace kiln {

inline constexpr int kMaxDims = 16;

// Operand 0 is the output. Dim 0 is the innermost (fastest-moving) one.
// Dims of size 1 are dropped and neighbours that are contiguous for every
// operand are merged, so a contiguous tensor becomes a single dim.
template <int N>
struct StridedLayout {
  int ndim = 0;
  int64_t numel = 1;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // Element offsets of linear index `i` (row-major over the original shape).
  KILN_HD void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      // the outermost dim needs no modulo: i is already below its size
      const int64_t idx = d == ndim - 1 ? i : i % sizes[d];
      if (d != ndim - 1) i /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += idx * strides[k][d];
    }
  }
  // True when every operand is contiguous or a broadcast scalar (stride 0).
  bool is_flat() const {
    if (ndim > 1) return false;
    for (int k = 0; k < N; ++k)
      if (ndim == 1 && strides[k][0] != 1 && strides[k][0] != 0) return false;
    return true;
  }
  bool is_scalar_operand(int k) const { return ndim == 0 || (ndim == 1 && strides[k][0] == 0); }
};

// Builds the layout of tensors that all have `shape`. Returns false when more
// than kMaxDims dims remain after merging (the caller then copies to contiguous).
template <int N>
bool make_layout(const Shape& shape, const Tensor* const (&ops)[N], StridedLayout<N>& L) {
  L = StridedLayout<N>();
  for (int64_t s : shape) L.numel *= s;
  int64_t sizes[64];
  int64_t strides[N][64];
  int nd = 0;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    if (nd > 0) {
      bool merge = true;
      for (int k = 0; k < N; ++k)
        merge = merge && ops[k]->stride(d) == strides[k][nd - 1] * sizes[nd - 1];
      if (merge) {
        sizes[nd - 1] *= shape[d];
        continue;
      }
    }
    sizes[nd] = shape[d];
    for (int k = 0; k < N; ++k) strides[k][nd] = ops[k]->stride(d);
    ++nd;
  }
  if (nd > kMaxDims) return false;
  L.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    L.sizes[d] = sizes[d];
    for (int k = 0; k < N; ++k) L.strides[k][d] = strides[k][d];
  }
  return true;
}

}  // namespace kiln
