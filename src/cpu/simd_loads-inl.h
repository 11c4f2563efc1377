// Loads that decode weights into float32 lanes, shared by the Highway files
// (simd_dot.cpp, simd_cast.cpp): bfloat16 and float16 promoted in registers, and
// the fp8 codes decoded with integer ops. Included once per SIMD target.
#if defined(KILN_CPU_SIMD_LOADS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KILN_CPU_SIMD_LOADS_INL_H_
#undef KILN_CPU_SIMD_LOADS_INL_H_
#else
#define KILN_CPU_SIMD_LOADS_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"
#include "kiln/scalar_types.h"

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// load_w for dot_rows / axpy_rows over bfloat16 weights: promoted in registers (no widened copy).
HWY_INLINE auto bf16_loader(const hwy::bfloat16_t* HWY_RESTRICT w) {
  return [w](auto d, size_t i) {
    const hn::Rebind<hwy::bfloat16_t, decltype(d)> dbf;
    return hn::PromoteTo(d, hn::LoadU(dbf, w + i));
  };
}

// Highway's float16 conversions are IEEE (nearest even, inf, NaN) only through
// F16C (AVX2 targets and up); its fallback for older targets truncates and
// mishandles inf and NaN, so those targets convert lane by lane with kiln::bits.
#undef KILN_SIMD_F16C  // this header is included once per target
#if HWY_ARCH_X86 && HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
#define KILN_SIMD_F16C 1
#endif

// load_w for dot_rows over float16 weights: promoted in registers.
HWY_INLINE auto f16_loader(const uint16_t* HWY_RESTRICT w) {
  return [w](auto d, size_t i) {
#ifdef KILN_SIMD_F16C
    const hn::Rebind<hwy::float16_t, decltype(d)> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(w + i)));
#else
    HWY_ALIGN float f[hn::MaxLanes(d)];
    for (size_t j = 0; j < hn::Lanes(d); ++j) f[j] = kiln::bits::f16_to_f32(w[i + j]);
    return hn::Load(d, f);
#endif
  };
}

// float8_e4m3fn codes (L of them from p) decoded in registers with integer ops:
// normals move their 7 magnitude bits under float's exponent and add the bias
// difference (120); subnormals (exponent 0) are m * 2^-9; 0x7f/0xff are NaN. No
// float subnormal is ever formed (on x86 those cost a microcode assist each).
template <class D>
HWY_INLINE hn::Vec<D> load_e4m3(D d, const uint8_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint8_t, D> d8;
  const auto b = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(d8, p)));
  const auto mag = hn::And(b, hn::Set(di, 0x7f));
  const auto normal = hn::BitCast(d, hn::Add(hn::ShiftLeft<20>(mag), hn::Set(di, 120 << 23)));
  const auto sub = hn::Mul(hn::ConvertTo(d, mag), hn::Set(d, 0.001953125f));  // 2^-9
  auto v = hn::IfThenElse(hn::RebindMask(d, hn::Lt(mag, hn::Set(di, 8))), sub, normal);
  v = hn::IfThenElse(hn::RebindMask(d, hn::Eq(mag, hn::Set(di, 0x7f))),
                     hn::Set(d, std::numeric_limits<float>::quiet_NaN()), v);
  return hn::Or(v, hn::BitCast(d, hn::ShiftLeft<24>(hn::And(b, hn::Set(di, 0x80)))));  // sign, NaN's too
}

// L float8_e5m2 codes from p as their exact float32 (a NaN made quiet, as kiln::bits).
template <class D>
HWY_INLINE hn::Vec<D> load_e5m2(D d, const uint8_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<D> di;
  const auto b = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(hn::Rebind<uint8_t, D>(), p)));
  const auto mag = hn::And(b, hn::Set(di, 0x7f));
  const auto normal = hn::BitCast(d, hn::Add(hn::ShiftLeft<21>(mag), hn::Set(di, 112 << 23)));
  const auto sub = hn::Mul(hn::ConvertTo(d, mag), hn::Set(d, 1.52587890625e-05f));  // 2^-16
  const auto inf_nan = hn::Or(hn::ShiftLeft<21>(mag), hn::Set(di, 0x7f800000));
  const auto quiet = hn::IfThenElseZero(hn::Gt(mag, hn::Set(di, 0x7c)), hn::Set(di, 0x400000));
  auto v = hn::IfThenElse(hn::RebindMask(d, hn::Lt(mag, hn::Set(di, 4))), sub, normal);
  v = hn::IfThenElse(hn::RebindMask(d, hn::Gt(mag, hn::Set(di, 0x7b))), hn::BitCast(d, hn::Or(inf_nan, quiet)), v);
  return hn::Or(v, hn::BitCast(d, hn::ShiftLeft<24>(hn::And(b, hn::Set(di, 0x80)))));
}

}  // namespace kiln::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
