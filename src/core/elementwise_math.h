// The scalar definition of every elementwise op, shared by the CPU and CUDA
// backends (the CUDA kernels call these per element; the CPU uses them where
// no Highway kernel exists). Reduced floats are computed in float32.
#pragma once

#include <math.h>

#include <type_traits>

#include "core/backend.h"
#include "kiln/scalar_types.h"

namespace kiln::math {

template <class T>
KILN_HD bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

KILN_HD float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
KILN_HD float gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}
KILN_HD float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// silu(gate) * up as the CUDA kernels compute it: silu_and_mul's and the MoE gate|up
// kernel that fuses it must give the same bits.
KILN_HD float silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// C = compute type (float, or the integer type itself).
template <class C>
KILN_HD C unary(UnaryOp op, C x) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::Neg: return -x;
      case UnaryOp::Abs: return fabsf(x);
      case UnaryOp::Exp: return expf(x);
      case UnaryOp::Log: return logf(x);
      case UnaryOp::Sqrt: return sqrtf(x);
      case UnaryOp::Rsqrt: return 1.0f / sqrtf(x);
      case UnaryOp::Tanh: return tanhf(x);
      case UnaryOp::Sigmoid: return sigmoid(x);
      case UnaryOp::Silu: return x * sigmoid(x);
      case UnaryOp::Gelu: return gelu_erf(x);
      case UnaryOp::GeluTanh: return gelu_tanh(x);
    }
    return x;
  } else {
    // integers: only neg and abs reach here (the front door promotes the rest)
    if (op == UnaryOp::Neg) return static_cast<C>(-x);
    if constexpr (std::is_signed_v<C>) return x < 0 ? static_cast<C>(-x) : x;
    return x;
  }
}

template <class C>
KILN_HD C int_pow(C base, C e) {
  if constexpr (std::is_signed_v<C>) {
    if (e < 0) {
      if (base == 1) return 1;
      if (base == -1) return (e & 1) ? C(-1) : C(1);
      return 0;
    }
  }
  C result = 1;
  while (e) {
    if (e & 1) result = static_cast<C>(result * base);
    base = static_cast<C>(base * base);
    e = static_cast<C>(e >> 1);
  }
  return result;
}

template <class C>
KILN_HD C binary(BinaryOp op, C a, C b, C alpha) {
  switch (op) {
    case BinaryOp::Add: return static_cast<C>(a + alpha * b);
    case BinaryOp::Sub: return static_cast<C>(a - alpha * b);
    case BinaryOp::Mul: return static_cast<C>(a * b);
    case BinaryOp::Div:
      if constexpr (std::is_floating_point_v<C>) return a / b;
      else return b == 0 ? C(0) : static_cast<C>(a / b);  // not reached: div promotes integers to float
    case BinaryOp::Pow:
      if constexpr (std::is_floating_point_v<C>) return powf(a, b);
      else return int_pow(a, b);
    case BinaryOp::Maximum:
      if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
      return a > b ? a : b;
    case BinaryOp::Minimum:
      if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
      return a < b ? a : b;
  }
  return a;
}

template <class C>
KILN_HD bool compare(CompareOp op, C a, C b) {
  switch (op) {
    case CompareOp::Eq: return a == b;
    case CompareOp::Ne: return a != b;
    case CompareOp::Lt: return a < b;
    case CompareOp::Le: return a <= b;
    case CompareOp::Gt: return a > b;
    case CompareOp::Ge: return a >= b;
  }
  return false;
}

}  // namespace kiln::math
