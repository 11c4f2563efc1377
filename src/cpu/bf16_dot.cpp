// AVX512-BF16 decode dot products. Why: a decode linear on the CPU streams its
// weights once, and on a 2-core Sapphire Rapids VM its time is the weight read
// plus the arithmetic, barely overlapped, so the arithmetic per byte decides how
// close it comes to the read bandwidth. VDPBF16PS multiplies 32 bf16 pairs a
// step with no widening; float8_e4m3fn codes become bf16 through two 128-entry
// byte lookups (VPERMI2B, one for each byte of the bf16 value), exact for every
// code, subnormals and NaN included, in 3 instructions per 64 codes.
// (Building the bf16 words with two shifts and two byte blends instead of the
// two unpacks, so that only the lookups use the shuffle ports: no faster on a
// 2-core Zen 5 VM, 27-33 G codes/s a core either way from the L3.)
#include "cpu/bf16_dot.h"

#include "kiln/scalar_types.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KILN_BF16_DOT_X86 1
#define KILN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512bf16")))
#endif

namespace kiln::cpu::bf16_dot {

namespace {

// A whole block of 64 e4m3 codes decodes to two vectors of 32 bf16: the low
// one holds codes 8c + t of the 16-byte lanes c = 0..3 (t < 8), the high one
// codes 8c + 8 + t (the interleave of VPUNPCK{L,H}BW). Position p of the block
// in e4m3 order holds the value of code source_of(p).
inline size_t source_of(size_t p) {
  const size_t half = p / 32, lane = (p % 32) / 8, t = p % 8;
  return lane * 16 + half * 8 + t;
}

float tail_dot_bf16(const uint16_t* w, const uint16_t* x, size_t i, size_t k) {
  float s = 0.0f;
  for (; i < k; ++i) s += bits::bf16_to_f32(w[i]) * bits::bf16_to_f32(x[i]);
  return s;
}

float tail_dot_e4m3(const uint8_t* w, const uint16_t* x, size_t i, size_t k) {
  float s = 0.0f;
  for (; i < k; ++i) s += bits::e4m3fn_to_f32(w[i]) * bits::bf16_to_f32(x[i]);
  return s;
}

#ifdef KILN_BF16_DOT_X86

// bf16 bits of every e4m3 magnitude (code & 0x7f), split into low and high
// bytes, each 128 bytes = two registers for VPERMI2B.
struct E4M3Tables {
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t hi[128];
  E4M3Tables() {
    for (int m = 0; m < 128; ++m) {
      const uint16_t b = bits::bf16_from_f32(bits::e4m3fn_to_f32(static_cast<uint8_t>(m)));
      lo[m] = static_cast<uint8_t>(b & 0xff);
      hi[m] = static_cast<uint8_t>(b >> 8);
    }
  }
};
const E4M3Tables kE4M3;

// 64 bf16 weights from w as two vectors of 32.
struct LoadBF16 {
  const uint16_t* w;
  size_t ahead;  // bytes: asks for the two lines this far ahead of each 64 weights (0: none)
  KILN_BF16_TARGET void operator()(size_t i, __m512i& a, __m512i& b) const {
    if (ahead != 0) {
      _mm_prefetch(reinterpret_cast<const char*>(w + i) + ahead, _MM_HINT_NTA);
      _mm_prefetch(reinterpret_cast<const char*>(w + i) + ahead + 64, _MM_HINT_NTA);
    }
    a = _mm512_loadu_si512(w + i);
    b = _mm512_loadu_si512(w + i + 32);
  }
};

// 64 e4m3 codes from w decoded to two vectors of 32 bf16 (in e4m3 order).
struct DecodeE4M3 {
  const uint8_t* w;
  size_t ahead;  // bytes: asks for the line this far ahead of each 64 codes (0: none)
  __m512i lo0, lo1, hi0, hi1, sign;
  KILN_BF16_TARGET DecodeE4M3(const uint8_t* weights, size_t prefetch_ahead)
      : w(weights),
        ahead(prefetch_ahead),
        lo0(_mm512_load_si512(kE4M3.lo)),
        lo1(_mm512_load_si512(kE4M3.lo + 64)),
        hi0(_mm512_load_si512(kE4M3.hi)),
        hi1(_mm512_load_si512(kE4M3.hi + 64)),
        sign(_mm512_set1_epi8(static_cast<char>(0x80))) {}
  KILN_BF16_TARGET void operator()(size_t i, __m512i& a, __m512i& b) const {
    __m512i c = _mm512_loadu_si512(w + i);
    // One load of the 64 codes: left alone, GCC loads them again for each of the
    // three instructions that read them (VPERMI2B overwrites its index operand).
    // Streaming from DRAM on one core of a Zen 5 VM: 18 -> 26 GB/s (loads alone: 31).
    asm("" : "+v"(c));
    // past the end of the weights is harmless: a prefetch never faults
    if (ahead != 0) _mm_prefetch(reinterpret_cast<const char*>(w + i + ahead), _MM_HINT_NTA);
    const __m512i lo = _mm512_permutex2var_epi8(lo0, c, lo1);  // index bit 7 (the sign) is ignored
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, c, hi1), c, sign, 0xf8);  // | c & 0x80
    a = _mm512_unpacklo_epi8(lo, hi);
    b = _mm512_unpackhi_epi8(lo, hi);
  }
};

// (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its own header.) A tree
// of four shuffles and adds in place of the 16 serial adds was no faster on a
// 2-core Zen 4 VM: a Qwen3-0.6B bf16 decode step at 128 context 69-72% of the read
// against 73-74% (4 alternations, December 2026): the row's end is not the bound.
KILN_BF16_TARGET inline float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0.0f;
  for (float l : lanes) s += l;
  return s;
}

KILN_BF16_TARGET inline __m512 dot(__m512 acc, __m512i w, const uint16_t* x) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w), reinterpret_cast<__m512bh>(_mm512_loadu_si512(x)));
}

// Whole blocks of 64 weights; returns the index where the tail starts. One row:
// four chains, so the dot-product latency does not bound the loop.
template <int R, class Decode>
KILN_BF16_TARGET size_t dot_blocks(const Decode& decode, const uint16_t* x, size_t x_stride, size_t k, float* acc) {
  __m512 s[R][2];
  for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = _mm512_setzero_ps();
  size_t i = 0;
  __m512i a, b;
  if constexpr (R == 1) {
    __m512 t0 = _mm512_setzero_ps(), t1 = _mm512_setzero_ps();
    for (; i + 128 <= k; i += 128) {
      __m512i c, d;
      decode(i, a, b);
      decode(i + 64, c, d);
      s[0][0] = dot(s[0][0], a, x + i);
      s[0][1] = dot(s[0][1], b, x + i + 32);
      t0 = dot(t0, c, x + i + 64);
      t1 = dot(t1, d, x + i + 96);
    }
    s[0][0] = _mm512_add_ps(s[0][0], t0);
    s[0][1] = _mm512_add_ps(s[0][1], t1);
  }
  for (; i + 64 <= k; i += 64) {
    decode(i, a, b);
    for (int r = 0; r < R; ++r) {
      s[r][0] = dot(s[r][0], a, x + r * x_stride + i);
      s[r][1] = dot(s[r][1], b, x + r * x_stride + i + 32);
    }
  }
  for (int r = 0; r < R; ++r) acc[r] = sum_lanes(_mm512_add_ps(s[r][0], s[r][1]));
  return i;
}

template <class Decode>
KILN_BF16_TARGET size_t dot_blocks_any(int rows, const Decode& decode, const uint16_t* x, size_t x_stride, size_t k,
                                       float* acc) {
  switch (rows) {
    case 1: return dot_blocks<1>(decode, x, x_stride, k, acc);
    case 2: return dot_blocks<2>(decode, x, x_stride, k, acc);
    case 3: return dot_blocks<3>(decode, x, x_stride, k, acc);
    case 4: return dot_blocks<4>(decode, x, x_stride, k, acc);
    case 5: return dot_blocks<5>(decode, x, x_stride, k, acc);
    case 6: return dot_blocks<6>(decode, x, x_stride, k, acc);
    case 7: return dot_blocks<7>(decode, x, x_stride, k, acc);
    default: return dot_blocks<8>(decode, x, x_stride, k, acc);
  }
}

#endif  // KILN_BF16_DOT_X86

}  // namespace

bool available() {
#ifdef KILN_BF16_DOT_X86
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vbmi") &&
                          __builtin_cpu_supports("avx512bw");
  return has;
#else
  return false;
#endif
}

void to_e4m3_order(const uint16_t* x, uint16_t* out, size_t k) {
  size_t i = 0;
  for (; i + 64 <= k; i += 64)
    for (size_t p = 0; p < 64; ++p) out[i + p] = x[i + source_of(p)];
  for (; i < k; ++i) out[i] = x[i];
}

#ifdef KILN_BF16_DOT_X86
void dot_rows_bf16(const uint16_t* w, const uint16_t* x, size_t x_stride, int rows, size_t k, float* acc,
                   size_t prefetch_ahead) {
  const size_t i = dot_blocks_any(rows, LoadBF16{w, prefetch_ahead}, x, x_stride, k, acc);
  for (int r = 0; r < rows; ++r) acc[r] += tail_dot_bf16(w, x + r * x_stride, i, k);
}

void dot_rows_e4m3(const uint8_t* w, const uint16_t* x, size_t x_stride, int rows, size_t k, float* acc,
                   size_t prefetch_ahead) {
  const size_t i = dot_blocks_any(rows, DecodeE4M3(w, prefetch_ahead), x, x_stride, k, acc);
  for (int r = 0; r < rows; ++r) acc[r] += tail_dot_e4m3(w, x + r * x_stride, i, k);
}
#else
// Never reached: callers ask available() first. Plain loops keep them correct.
void dot_rows_bf16(const uint16_t* w, const uint16_t* x, size_t x_stride, int rows, size_t k, float* acc, size_t) {
  for (int r = 0; r < rows; ++r) acc[r] = tail_dot_bf16(w, x + r * x_stride, 0, k);
}

void dot_rows_e4m3(const uint8_t* w, const uint16_t* x, size_t x_stride, int rows, size_t k, float* acc, size_t) {
  // x is in e4m3 order: undo it per block
  for (int r = 0; r < rows; ++r) {
    const uint16_t* xr = x + r * x_stride;
    float s = 0.0f;
    size_t i = 0;
    for (; i + 64 <= k; i += 64)
      for (size_t p = 0; p < 64; ++p) s += bits::e4m3fn_to_f32(w[i + source_of(p)]) * bits::bf16_to_f32(xr[i + p]);
    acc[r] = s + tail_dot_e4m3(w, xr, i, k);
  }
}
#endif

}  // namespace kiln::cpu::bf16_dot
