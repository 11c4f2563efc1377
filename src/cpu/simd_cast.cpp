// Highway dtype casts between float32, bfloat16, float16 and the fp8 formats,
// bit for bit the rules of kiln::bits (src/cpu/simd.h).
// Highway's foreach_target re-includes this file once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd_cast.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "cpu/simd_loads-inl.h"
#include "cpu/simd.h"
#include "kiln/scalar_types.h"

#include <limits>
#include <type_traits>
#include <utility>

HWY_BEFORE_NAMESPACE();
namespace kiln::cpu::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- casts: the rules of kiln::bits (scalar_types.h) in integer lanes, bit for bit ----
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;

// float32 bits -> bfloat16 bits in the low half of each lane (nearest even, NaN 0x7fc0).
HWY_INLINE hn::Vec<DI> bf16_codes(hn::Vec<DU> x) {
  const DU du;
  const DI di;
  const auto rounded = hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du, 0x7fffu), hn::And(hn::ShiftRight<16>(x), hn::Set(du, 1u)))));
  const auto mag = hn::BitCast(di, hn::And(x, hn::Set(du, 0x7fffffffu)));
  return hn::IfThenElse(hn::Gt(mag, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7fc0), hn::BitCast(di, rounded));
}

// float32 bits -> the codes of a float8 with M mantissa bits and exponent bias
// kBias, in the low byte of each lane, nearest even; magnitudes above the float32
// bits `over` give `over_code`, NaN gives 0x7f.
template <int M, int kBias>
HWY_INLINE hn::Vec<DI> f8_codes(hn::Vec<DU> x, int32_t over, int32_t over_code) {
  constexpr int kShift = 23 - M, kUnitExp = 1 - kBias - M;  // the subnormal unit is 2^kUnitExp
  const DF df;
  const DI di;
  const auto sign = hn::And(hn::BitCast(di, hn::ShiftRight<24>(x)), hn::Set(di, 0x80));
  const auto a = hn::BitCast(di, hn::And(x, hn::Set(DU(), 0x7fffffffu)));
  // below the smallest normal: adding 2^(23 + kUnitExp) lets the FPU round to the subnormal unit
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, a), hn::Set(df, static_cast<float>(1 << (23 + kUnitExp))))),
                           hn::Set(di, (127 + 23 + kUnitExp) << 23));
  const auto odd = hn::And(hn::ShiftRight<kShift>(a), hn::Set(di, 1));
  const auto normal =
      hn::ShiftRight<kShift>(hn::Add(hn::Add(a, hn::Set(di, -((127 - kBias) << 23) + (1 << (kShift - 1)) - 1)), odd));
  auto code = hn::IfThenElse(hn::Lt(a, hn::Set(di, (128 - kBias) << 23)), sub, normal);
  code = hn::IfThenElse(hn::Gt(a, hn::Set(di, over)), hn::Set(di, over_code), code);
  code = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7f), code);  // NaN
  return hn::Or(code, sign);
}

// e4m3fn: past 464 (the midpoint above 448), 448 when saturating, else NaN
HWY_INLINE hn::Vec<DI> e4m3_codes(hn::Vec<DU> x, bool saturate) {
  return f8_codes<3, 7>(x, 0x43e80000, saturate ? 0x7e : 0x7f);
}
// e5m2: from 2^16 (past 57344 + half a step) on, inf
HWY_INLINE hn::Vec<DI> e5m2_codes(hn::Vec<DU> x) { return f8_codes<2, 15>(x, (143 << 23) - 1, 0x7c); }

HWY_INLINE hn::Vec<DU> load_f32_bits(const float* p) { return hn::BitCast(DU(), hn::LoadU(DF(), p)); }
HWY_INLINE hn::Vec<DU> load_bf16_bits(const uint16_t* p) {
  return hn::ShiftLeft<16>(hn::PromoteTo(DU(), hn::LoadU(hn::Rebind<uint16_t, DU>(), p)));
}
HWY_INLINE void store_u16(hn::Vec<DI> codes, uint16_t* p) { hn::StoreU(hn::DemoteTo(hn::Rebind<uint16_t, DI>(), codes), hn::Rebind<uint16_t, DI>(), p); }
HWY_INLINE void store_u8(hn::Vec<DI> codes, uint8_t* p) { hn::StoreU(hn::DemoteTo(hn::Rebind<uint8_t, DI>(), codes), hn::Rebind<uint8_t, DI>(), p); }

// Whole vectors through `vec(i)`, the rest through `one(i)`.
template <class Vec, class One>
HWY_INLINE void cast_loop(size_t n, Vec vec, One one) {
  const size_t L = hn::Lanes(DF());
  size_t i = 0;
  for (; i + L <= n; i += L) vec(i);
  for (; i < n; ++i) one(i);
}

bool CastRun(DType dst, void* HWY_RESTRICT out, DType src, const void* HWY_RESTRICT in, size_t n, bool saturate) {
  namespace kb = kiln::bits;
  const auto* f32 = static_cast<const float*>(in);
  const auto* u16 = static_cast<const uint16_t*>(in);
  const auto* u8 = static_cast<const uint8_t*>(in);
  if (dst == DType::BFloat16 && src == DType::Float32) {
    auto* o = static_cast<uint16_t*>(out);
    cast_loop(n, [&](size_t i) { store_u16(bf16_codes(load_f32_bits(f32 + i)), o + i); },
              [&](size_t i) { o[i] = kb::bf16_from_f32(f32[i]); });
  } else if (dst == DType::Float32 && src == DType::BFloat16) {
    auto* o = static_cast<float*>(out);
    cast_loop(n, [&](size_t i) { hn::StoreU(hn::BitCast(DF(), load_bf16_bits(u16 + i)), DF(), o + i); },
              [&](size_t i) { o[i] = kb::bf16_to_f32(u16[i]); });
  } else if (dst == DType::Float8_e4m3fn && src == DType::Float32) {
    auto* o = static_cast<uint8_t*>(out);
    cast_loop(n, [&](size_t i) { store_u8(e4m3_codes(load_f32_bits(f32 + i), saturate), o + i); },
              [&](size_t i) { o[i] = kb::e4m3fn_from_f32(f32[i], saturate); });
  } else if (dst == DType::Float8_e4m3fn && src == DType::BFloat16) {
    auto* o = static_cast<uint8_t*>(out);
    cast_loop(n, [&](size_t i) { store_u8(e4m3_codes(load_bf16_bits(u16 + i), saturate), o + i); },
              [&](size_t i) { o[i] = kb::e4m3fn_from_f32(kb::bf16_to_f32(u16[i]), saturate); });
  } else if (dst == DType::Float32 && src == DType::Float8_e4m3fn) {
    auto* o = static_cast<float*>(out);
    cast_loop(n, [&](size_t i) { hn::StoreU(load_e4m3(DF(), u8 + i), DF(), o + i); },
              [&](size_t i) { o[i] = kb::e4m3fn_to_f32(u8[i]); });
  } else if (dst == DType::BFloat16 && src == DType::Float8_e4m3fn) {
    auto* o = static_cast<uint16_t*>(out);
    cast_loop(n, [&](size_t i) { store_u16(bf16_codes(hn::BitCast(DU(), load_e4m3(DF(), u8 + i))), o + i); },
              [&](size_t i) { o[i] = kb::bf16_from_f32(kb::e4m3fn_to_f32(u8[i])); });
  } else if (dst == DType::Float8_e5m2 && (src == DType::Float32 || src == DType::BFloat16)) {
    auto* o = static_cast<uint8_t*>(out);
    if (src == DType::Float32)
      cast_loop(n, [&](size_t i) { store_u8(e5m2_codes(load_f32_bits(f32 + i)), o + i); },
                [&](size_t i) { o[i] = kb::e5m2_from_f32(f32[i]); });
    else
      cast_loop(n, [&](size_t i) { store_u8(e5m2_codes(load_bf16_bits(u16 + i)), o + i); },
                [&](size_t i) { o[i] = kb::e5m2_from_f32(kb::bf16_to_f32(u16[i])); });
  } else if (src == DType::Float8_e5m2 && (dst == DType::Float32 || dst == DType::BFloat16)) {
    if (dst == DType::Float32) {
      auto* o = static_cast<float*>(out);
      cast_loop(n, [&](size_t i) { hn::StoreU(load_e5m2(DF(), u8 + i), DF(), o + i); },
                [&](size_t i) { o[i] = kb::e5m2_to_f32(u8[i]); });
    } else {
      auto* o = static_cast<uint16_t*>(out);
      cast_loop(n, [&](size_t i) { store_u16(bf16_codes(hn::BitCast(DU(), load_e5m2(DF(), u8 + i))), o + i); },
                [&](size_t i) { o[i] = kb::bf16_from_f32(kb::e5m2_to_f32(u8[i])); });
    }
#ifdef KILN_SIMD_F16C
  } else if (dst == DType::Float32 && src == DType::Float16) {
    auto* o = static_cast<float*>(out);
    cast_loop(n, [&](size_t i) { hn::StoreU(f16_loader(u16)(DF(), i), DF(), o + i); },
              [&](size_t i) { o[i] = kb::f16_to_f32(u16[i]); });
  } else if (dst == DType::Float16 && src == DType::Float32) {
    auto* o = static_cast<uint16_t*>(out);
    const hn::Rebind<hwy::float16_t, DF> dh;
    cast_loop(n, [&](size_t i) {
                auto v = hn::LoadU(DF(), f32 + i);
                // a NaN becomes the quiet NaN of its sign first, as kiln::bits gives (sign | 0x7e00)
                v = hn::IfThenElse(hn::IsNaN(v), hn::CopySign(hn::Set(DF(), std::numeric_limits<float>::quiet_NaN()), v), v);
                hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(o + i));
              },
              [&](size_t i) { o[i] = kb::f16_from_f32(f32[i]); });
#endif
  } else {
    return false;
  }
  return true;
}

}  // namespace kiln::cpu::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kiln::cpu::simd {
HWY_EXPORT(CastRun);

bool cast_run(DType dst, void* out, DType src, const void* in, size_t n, bool saturate) {
  return HWY_DYNAMIC_DISPATCH(CastRun)(dst, out, src, in, n, saturate);
}
}  // namespace kiln::cpu::simd
#endif
