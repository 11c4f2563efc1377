// The device pieces of kiln::linalg's backward formulas (ops/linalg_backward.cpp;
// pinv's product uses the gemm too):
// a batched gemm with conjugate transposes, and the per-element masks
// and scalings the formulas apply. Operands are contiguous [b, r, c] batches of
// float32 or complex64 on the current device.
#pragma once

#include "kiln/tensor.h"

namespace kiln::cuda_backend {

// out [b, m, n] = alpha op(a) op(b), op the conjugate transpose where asked (cuBLAS).
void matmul_adjoint(const Tensor& out, const Tensor& a, bool adjoint_a, const Tensor& b, bool adjoint_b, float alpha);

// Each matrix i of t times grad[i] * conj(det[i]) (det_backward's scaling).
void scale_by_grad_conj_det(const Tensor& t, const Tensor& grad, const Tensor& det);

// Zeroes what lies outside a triangle of each matrix: below the diagonal (upper) or
// above it, and the diagonal itself unless keep_diagonal.
void keep_triangle(const Tensor& t, bool upper, bool keep_diagonal);

// lower's strict lower triangle with upper's upper triangle and diagonal, into lower.
void merge_triangles(const Tensor& lower, const Tensor& upper);

}  // namespace kiln::cuda_backend
