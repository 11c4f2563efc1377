// Decode dot products with bfloat16 inputs through AVX512-BF16 (VDPBF16PS: 32
// bf16 products a step, summed in float32), where the CPU has it
// (src/cpu/bf16_dot.cpp). Debian's Highway (1.0) has no op for it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::cpu::bf16_dot {

// The CPU has AVX512-BF16 and AVX512-VBMI (Sapphire Rapids, Zen 4 and later).
bool available();

// acc[r] = sum_k w[k] * x[r * x_stride + k] for r < rows (1..8); w and x are
// bfloat16 bits. Each product is exact; only the float32 sums round. Inputs
// below bfloat16's normal range (|v| < 1.2e-38) count as zero.
// prefetch_ahead > 0: each 64 weights also ask for the lines that many bytes ahead
// (non-temporal), which the caller chooses by CPU (see linear.cpp).
void dot_rows_bf16(const uint16_t* w, const uint16_t* x, size_t x_stride, int rows, size_t k, float* acc,
                   size_t prefetch_ahead = 0);

// The same with float8_e4m3fn weights (their bits; NaN codes give NaN): the x
// rows must be in e4m3 order (below), which the decode of 64 codes produces.
// prefetch_ahead: as above, for each 64 codes.
void dot_rows_e4m3(const uint8_t* w, const uint16_t* x_e4m3_order, size_t x_stride, int rows, size_t k, float* acc,
                   size_t prefetch_ahead = 0);
// out = x (k bfloat16 values) reordered, within each whole block of 64, to the
// order in which dot_rows_e4m3 decodes its weights.
void to_e4m3_order(const uint16_t* x, uint16_t* out, size_t k);

}  // namespace kiln::cpu::bf16_dot
