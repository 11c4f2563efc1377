// Whether a tensor's rows can be read with 16-byte vector loads (the decode
// kernels' requirement), checked on the host before choosing a kernel.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln {

// dim `inner` has unit stride, and the data pointer and every other dim's stride
// are multiples of 16 bytes.
inline bool rows_vector_aligned(const Tensor& t, int64_t inner) {
  if (t.stride(inner) != 1 || (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15) != 0) return false;
  const int64_t es = static_cast<int64_t>(t.itemsize());
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != inner && (t.stride(d) * es) % 16 != 0) return false;
  return true;
}

}  // namespace kiln
