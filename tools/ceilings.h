// The memory ceilings that `kiln bench` and `kiln bench-decode` hold kernels to,
// defined once so that both commands measure the same thing.
#pragma once

#include <cstdint>

#include "kiln/tensor.h"

namespace kiln::tools {

// The last-level cache of this CPU (32 MiB where the C library cannot say): data
// that fits stays there across repeats, which no decode step sees.
int64_t llc_bytes();

// The CPU's read ceiling: a float32 sum over twice the last-level cache and at
// least 512 MiB, so that every repeat reads DRAM, as a decode step reads its
// weights (and writes almost nothing). The copy ceiling counts a write per read,
// which a CPU streams faster than it reads (82 against 61 GB/s on a 2-core VM).
Tensor make_read_ceiling_input();
// Sums the input above; its bytes are input.nbytes().
void run_read_ceiling(const Tensor& input);

}  // namespace kiln::tools
