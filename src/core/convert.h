// Element conversion between any two dtypes, shared by the CPU and CUDA copy
// kernels so that both cast identically.
#pragma once

#include <complex>
#include <type_traits>

#include "core/dispatch.h"
#include "kiln/scalar_types.h"
#include "kiln/tensor.h"

namespace kiln::detail {

template <class T> struct is_complex_t : std::false_type {};
template <> struct is_complex_t<std::complex<float>> : std::true_type {};
template <> struct is_complex_t<Complex64> : std::true_type {};

template <class S>
KILN_HD compute_t<S> to_compute(const S& s) {
  return static_cast<compute_t<S>>(s);
}

// D from S, rounding to nearest even; `saturate` applies to float8_e4m3fn targets.
template <class D, class S>
KILN_HD D convert(const S& s, bool saturate) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<D, Float8_e4m3fn>) {
    float f;
    if constexpr (is_complex_t<S>::value) f = s.real();
    else f = static_cast<float>(to_compute(s));
    return D::from_bits(bits::e4m3fn_from_f32(f, saturate));
  } else if constexpr (std::is_same_v<S, std::complex<float>>) {
    return convert<D>(s.real(), saturate);
  } else if constexpr (std::is_same_v<D, std::complex<float>>) {
    return D(static_cast<float>(to_compute(s)), 0.0f);
  } else if constexpr (std::is_same_v<D, bool>) {
    return to_compute(s) != compute_t<S>(0);
  } else {
    return static_cast<D>(static_cast<compute_t<D>>(to_compute(s)));
  }
}

// A kiln::Scalar as element type D (host side).
template <class D>
D scalar_to(const Scalar& v) {
  if constexpr (std::is_same_v<D, std::complex<float>>) {
    const auto c = v.to_complex();
    return D(static_cast<float>(c.real()), static_cast<float>(c.imag()));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v.to_bool();
  } else if constexpr (std::is_integral_v<D>) {
    if (v.is_floating_point()) return static_cast<D>(v.to_double());
    return static_cast<D>(v.to_uint64());  // two's-complement wrap, as a C cast
  } else {
    return convert<D>(static_cast<float>(v.to_double()), true);
  }
}

}  // namespace kiln::detail
