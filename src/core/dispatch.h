// dtype -> C++ type dispatch, shared by every backend:
//   dispatch_all(dt, "op", [&](auto tag) { using T = typename decltype(tag)::type; ... });
// The subset functions list, in one place per family, which dtypes an op
// family supports; anything else throws an error naming the op and dtype.
#pragma once

#include "core/check.h"
#include "kiln/tensor.h"

namespace kiln::detail {

template <class T>
struct TypeTag {
  using type = T;
};

#define KILN_DT_CASE(D)                                    \
  case DType::D:                                           \
    f(TypeTag<typename dtype_traits<DType::D>::type>{});   \
    return;

// Every dtype except complex64.
template <class F>
void dispatch_real(DType dt, const char* op, F&& f) {
  switch (dt) {
    KILN_DT_CASE(Bool) KILN_DT_CASE(UInt8) KILN_DT_CASE(Int8) KILN_DT_CASE(Int16) KILN_DT_CASE(Int32)
    KILN_DT_CASE(Int64) KILN_DT_CASE(UInt16) KILN_DT_CASE(UInt32) KILN_DT_CASE(UInt64)
    KILN_DT_CASE(Float16) KILN_DT_CASE(BFloat16) KILN_DT_CASE(Float32) KILN_DT_CASE(Float8_e4m3fn)
    KILN_DT_CASE(Float8_e5m2)
    default: break;
  }
  KILN_NOT_IMPLEMENTED(op, ": dtype ", dtype_name(dt), " is not supported");
}

// Arithmetic dtypes: integers (not bool) and float32/float16/bfloat16.
template <class F>
void dispatch_arith(DType dt, const char* op, F&& f) {
  switch (dt) {
    KILN_DT_CASE(UInt8) KILN_DT_CASE(Int8) KILN_DT_CASE(Int16) KILN_DT_CASE(Int32) KILN_DT_CASE(Int64)
    KILN_DT_CASE(UInt16) KILN_DT_CASE(UInt32) KILN_DT_CASE(UInt64) KILN_DT_CASE(Float16)
    KILN_DT_CASE(BFloat16) KILN_DT_CASE(Float32)
    default: break;
  }
  KILN_NOT_IMPLEMENTED(op, ": dtype ", dtype_name(dt), " is not supported");
}

// float32, float16, bfloat16: the dtypes of transcendental ops and matmul.
template <class F>
void dispatch_float(DType dt, const char* op, F&& f) {
  switch (dt) {
    KILN_DT_CASE(Float16) KILN_DT_CASE(BFloat16) KILN_DT_CASE(Float32)
    default: break;
  }
  KILN_NOT_IMPLEMENTED(op, ": dtype ", dtype_name(dt), " is not supported (float32, float16, bfloat16 are)");
}

#undef KILN_DT_CASE

// Arithmetic type of an element: float for the reduced floats, else itself.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<Half> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <> struct compute_type<Float8_e4m3fn> { using type = float; };
template <> struct compute_type<Float8_e5m2> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

}  // namespace kiln::detail
