// CPU few-rows linear (decode): threads split the output features; each weight
// row is dotted with every input row (bf16, fp16 and fp8 decoded in registers),
// so the weights are read from memory once per call. One weight row at a time:
// two rows a pass sharing the input loads (bit-identical sums) were slower on the
// 2-core Zen 5 VM, fp8 one row in, 1024 x 151936 46.5 -> 39.7 GB/s and 4096 x 32768
// 53.1 -> 35.5 (in-process alternation), as four rows were for a 0.6B decode step; and
// on a 2-core Zen 4 VM, one thread, bf16 1 x 4096 -> 81920: 16.5-16.9 GB/s against
// 19.2-20.6 one row at a time (a sum's read 28.7-30.1; 3 alternations, December 2026).
#include <vector>

#include "core/backend.h"
#include "core/check.h"
#include "core/dispatch.h"
#include "cpu/bf16_dot.h"
#include "cpu/loops.h"
#include "cpu/prefetch.h"
#include "cpu/simd.h"
#include "cpu/widen.h"

namespace kiln::cpu {

namespace {

// Asks for the bytes `distance` past a weight row (as many as the row has, never
// past end) while the row is dotted; the distance is cpu/prefetch.h's choice.
inline void prefetch_ahead(const char* row, int64_t bytes, const char* end, int64_t distance) {
  for (int64_t off = 0; off < bytes; off += 64) {
    const char* p = row + distance + off;
    if (p >= end) break;
    __builtin_prefetch(p);
  }
}

// The first element at or past `buffer` (32 spare elements) that lies `phase` bytes
// past the 64-byte phase of `weights`; `buffer` itself for a phase of 64 or more
// (no choice) or where none fits (odd addresses).
inline uint16_t* placed_input(uint16_t* buffer, const void* weights, size_t phase) {
  if (phase >= 64) return buffer;
  const uintptr_t want = (reinterpret_cast<uintptr_t>(weights) + phase) % 64;
  for (int i = 0; i < 32; ++i)
    if (reinterpret_cast<uintptr_t>(buffer + i) % 64 == want) return buffer + i;
  return buffer;
}

template <class X, class W>
void linear_typed(const LinearArgs& a) {
  const int64_t R = a.x.size(0), K = a.x.size(1), N = a.weight.size(0);
  // bfloat16 inputs with bf16 or fp8 weights: products in bf16 (exact) through
  // AVX512-BF16 where the CPU has it, the inputs copied once (fp8: reordered)
  constexpr bool bf16_inputs = std::is_same_v<X, BFloat16> && !std::is_same_v<W, float>;
  const bool use_bf16_dot = bf16_inputs && bf16_dot::available();
  std::vector<uint16_t> xb_store(use_bf16_dot ? static_cast<size_t>(R * K) + 32 : 0);
  const size_t phase = decode_input_phase();  // read (and checked) on every CPU, used with the bf16 dots
  uint16_t* const xb = use_bf16_dot ? placed_input(xb_store.data(), a.weight.data_ptr(), phase) : nullptr;
  // otherwise inputs as float32 rows, once
  std::vector<float> xf(use_bf16_dot ? 0 : static_cast<size_t>(R * K));
  for (int64_t r = 0; r < R; ++r) {
    const X* xr = a.x.data<X>() + r * a.x.stride(0);
    if (!use_bf16_dot) {
      widen(xr, xf.data() + r * K, K);
    } else if constexpr (bf16_inputs) {
      const auto* bits = reinterpret_cast<const uint16_t*>(xr);
      if constexpr (std::is_same_v<W, Float8_e4m3fn>) bf16_dot::to_e4m3_order(bits, xb + r * K, K);
      else std::copy(bits, bits + K, xb + r * K);
    }
  }
  const W* w = a.weight.data<W>();
  const int64_t ws = a.weight.stride(0);
  const float* scale = a.scale.defined() ? a.scale.data<float>() : nullptr;
  const bool per_row = a.per_row_scale();
  const X* bias = a.bias.defined() ? a.bias.data<X>() : nullptr;
  X* out = a.out.data<X>();
  const int64_t os = a.out.stride(0);
  const int64_t distance = row_prefetch_distance();  // cpu/prefetch.h: one of the two, by CPU
  const size_t line_ahead = line_prefetch_ahead();
  const auto body = [&](int64_t n0, int64_t n1) {
    float acc[8];
    const char* const w_end = reinterpret_cast<const char*>(w + (N - 1) * ws + K);  // into the next block too
    for (int64_t n = n0; n < n1; ++n) {
      if (distance > 0)
        prefetch_ahead(reinterpret_cast<const char*>(w + n * ws), K * static_cast<int64_t>(sizeof(W)), w_end, distance);
      if (use_bf16_dot) {
        if constexpr (std::is_same_v<W, Float8_e4m3fn>)
          bf16_dot::dot_rows_e4m3(reinterpret_cast<const uint8_t*>(w + n * ws), xb, static_cast<size_t>(K),
                                  static_cast<int>(R), static_cast<size_t>(K), acc, line_ahead);
        else
          bf16_dot::dot_rows_bf16(reinterpret_cast<const uint16_t*>(w + n * ws), xb, static_cast<size_t>(K),
                                  static_cast<int>(R), static_cast<size_t>(K), acc, line_ahead);
      } else if constexpr (std::is_same_v<W, BFloat16>) {
        simd::dot_rows_bf16(reinterpret_cast<const uint16_t*>(w + n * ws), xf.data(), static_cast<size_t>(K),
                            static_cast<int>(R), static_cast<size_t>(K), acc);
      } else if constexpr (std::is_same_v<W, Float8_e4m3fn>) {
        simd::dot_rows_e4m3(reinterpret_cast<const uint8_t*>(w + n * ws), xf.data(), static_cast<size_t>(K),
                            static_cast<int>(R), static_cast<size_t>(K), acc);
      } else if constexpr (std::is_same_v<W, Half>) {
        simd::dot_rows_f16(reinterpret_cast<const uint16_t*>(w + n * ws), xf.data(), static_cast<size_t>(K),
                           static_cast<int>(R), static_cast<size_t>(K), acc);
      } else {
        simd::dot_rows_f32(w + n * ws, xf.data(), static_cast<size_t>(K), static_cast<int>(R), static_cast<size_t>(K),
                           acc);
      }
      const float s = scale ? scale[per_row ? n : 0] : 1.0f;
      for (int64_t r = 0; r < R; ++r) {
        float v = acc[r] * s;
        if (bias) v += static_cast<float>(bias[n]);
        out[r * os + n] = X(v);
      }
    }
  };
  // blocks of about 64 KB of weights. Against halves fixed in advance, on the 2-core
  // Zen 5 VM: Qwen3-0.6B bf16 decode steps at 77, 72, 63, 78% of an adjacent read
  // became 81-83, 82-85, 83, 79% (4 runs of 30 alternations); fp8 -4 to +2 points;
  // 1 x 4096 -> 130048: bf16 91-92% either way, fp8 80-88% -> 89%.
  const int64_t row_bytes = std::max<int64_t>(K * static_cast<int64_t>(sizeof(W)), 1);
  parallel_for_balanced(N, std::max<int64_t>(1, 65536 / row_bytes), body);
}
}  // namespace

void linear_rows(const LinearArgs& args) {
  KILN_CHECK(args.x.size(0) <= 8, "linear_rows: at most 8 rows, got ", args.x.size(0));
  KILN_CHECK(!args.norm(), "linear_rows: the fused RMSNorm is a CUDA kernel; rms_norm_linear composes the ops on the CPU");
  if (args.swiglu) {  // the product, then silu_and_mul's own pass: its values exactly (a row is a few KB)
    LinearArgs product = args;
    product.swiglu = false;
    product.out = Tensor::empty({args.x.size(0), args.weight.size(0)}, args.out.dtype(), args.out.device());
    linear_rows(product);
    silu_and_mul_rows(args.out, product.out);
    return;
  }
  detail::dispatch_float(args.x.dtype(), "linear", [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    if (args.weight.dtype() == DType::Float8_e4m3fn) linear_typed<X, Float8_e4m3fn>(args);
    else linear_typed<X, X>(args);
  });
}

}  // namespace kiln::cpu
