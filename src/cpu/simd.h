// Highway kernels for contiguous float32 runs, compiled for every SIMD target
// and picked at run time (src/cpu/simd.cpp, simd_dot.cpp, simd_cast.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/backend.h"

namespace kiln::cpu::simd {

// Each returns false when `op` has no SIMD kernel (the caller then loops).
bool unary_f32(UnaryOp op, const float* in, float* out, size_t n);
// a_scalar / b_scalar: that operand is one value broadcast over the run.
bool binary_f32(BinaryOp op, const float* a, bool a_scalar, const float* b, bool b_scalar, float* out, size_t n,
                float alpha);
double sum_f32(const float* in, size_t n);
// acc[j] += in[j] for j < n, widened to double (column sums, one row at a time).
void accumulate_f64(const float* in, double* acc, size_t n);
// acc[j] += (a[j] + b[j]) + (c[j] + d[j]) in double: column sums four rows a pass, so the
// accumulators are loaded and stored a quarter as often.
void accumulate4_f64(const float* a, const float* b, const float* c, const float* d, double* acc, size_t n);
// Box-Muller: radius = sqrt(-2 log u1[j]), angle = 2 pi u2[j]; cos_out[j] = radius cos(angle)
// and sin_out[j] = radius sin(angle), for u1 in (0, 1] and u2 in [0, 1).
void box_muller_f32(const float* u1, const float* u2, float* cos_out, float* sin_out, size_t n);
// acc[r] = sum_k w[k] * x[r * x_stride + k] for r < rows (rows <= 8).
void dot_rows_f32(const float* w, const float* x, size_t x_stride, int rows, size_t k, float* acc);
// The same with bfloat16 weights (their bits), promoted in registers.
void dot_rows_bf16(const uint16_t* w, const float* x, size_t x_stride, int rows, size_t k, float* acc);
// The same with float16 weights (their bits), promoted in registers.
void dot_rows_f16(const uint16_t* w, const float* x, size_t x_stride, int rows, size_t k, float* acc);
// The same with float8_e4m3fn weights (their bits), decoded in registers.
void dot_rows_e4m3(const uint8_t* w, const float* x, size_t x_stride, int rows, size_t k, float* acc);
// One-query attention over `len` K or V cache rows of `dim` values, the rows
// `*_stride` elements apart, for `rows` query heads (at most 8):
// scores[r * score_stride + s] = dot(k row s, q + r * dim);
void dot_keys_f32(const float* k, size_t k_stride, size_t len, const float* q, int rows, size_t dim, float* scores,
                  size_t score_stride);
// bfloat16 rows: prefetch_ahead > 0 asks (non-temporal) for the lines that many
// bytes past each row as the kernel reaches it.
void dot_keys_bf16(const uint16_t* k, size_t k_stride, size_t len, const float* q, int rows, size_t dim, float* scores,
                   size_t score_stride, size_t prefetch_ahead = 0);
// acc[r * dim + j] += sum_s p[r * p_stride + s] * (v row s)[j].
void axpy_values_f32(const float* v, size_t v_stride, size_t len, const float* p, size_t p_stride, int rows,
                     size_t dim, float* acc);
void axpy_values_bf16(const uint16_t* v, size_t v_stride, size_t len, const float* p, size_t p_stride, int rows,
                      size_t dim, float* acc, size_t prefetch_ahead = 0);

// Contiguous casts among float32, bfloat16, float8_e4m3fn and float8_e5m2 (no
// e4m3 <-> e5m2), and between float32 and float16 (on CPUs with F16C), bit-exact
// with the scalar rules of kiln::bits;
// false (nothing written) for any other pair.
bool cast_run(DType dst, void* out, DType src, const void* in, size_t n, bool saturate);
// max (is_max) or min of n >= 1 floats; NaN when any is NaN.
float extreme_f32(bool is_max, const float* in, size_t n);
// The index of the first element equal to value (the first NaN when value is
// NaN); n when there is none.
size_t find_first_f32(const float* in, size_t n, float value);

}  // namespace kiln::cpu::simd
