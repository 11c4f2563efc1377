// Software prefetch and placement choices of the CPU decode kernels that stream
// memory once (decode linears, attention over a KV cache), by CPU vendor and family.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#include "core/check.h"

namespace kiln::cpu {

// A count of bytes from the environment variable `name`, or `fallback` when it is
// unset; anything but plain decimal digits is an error (strtoull alone would read
// "-1" as 2^64 - 1 and "4k" as 4).
inline size_t bytes_from_env(const char* name, size_t fallback) {
  const char* e = std::getenv(name);
  if (e == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long bytes = std::strtoull(e, &end, 10);
  KILN_CHECK(*e >= '0' && *e <= '9' && *end == '\0' && errno == 0, name, " must be a count of bytes (decimal digits), got '",
             e, "'");
  return static_cast<size_t>(bytes);
}

inline bool cpu_is_amd() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool amd = __builtin_cpu_is("amd");
  return amd;
#else
  return false;
#endif
}

// The x86 family number (base plus extended: Zen 3 and 4 are 0x19, Zen 5 0x1a), 0 elsewhere.
inline unsigned cpu_family() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const unsigned family = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0u;
    const unsigned base = (eax >> 8) & 0xf;
    return base == 0xf ? base + ((eax >> 20) & 0xff) : base;
  }();
  return family;
#else
  return 0;
#endif
}

// Decode linears on Intel ask for the bytes row_prefetch_distance() past a weight
// row (all of the row's lines at once) as they start it. The best distance depends
// on the CPU's own prefetchers. On a 2-core Xeon VM whose sum reads 31 GB/s, hardware
// prefetch alone held weight streams from DRAM to ~22 GB/s; 8 KB ahead gave 26-30
// for 1024 -> 151936 (an lm_head) and a Qwen3-0.6B decode step 62 -> 57 ms (4 and
// 16 KB: less; 1 line in 2 or 4: slower); a weight that stays in its 260 MB L3
// across calls pays for it (1 x 4096 -> 8192 bf16 repeated: 1255 -> 1600 us), but
// decode reads every weight from DRAM. On a 2-core Zen 5 VM the same 8 KB made
// it slower: 151936 x 1024 bf16 at 60% of the adjacent sum's GB/s against 91%
// without, the 0.6B decode linears in sequence 61% against 84% bf16, 65% against
// 81% fp8, and a whole 0.6B decode step 48% against 53% fp8, 80% against 82% bf16
// (medians of 30-38 alternations, each against a sum run just before it).
// Shorter distances (256-2048) were better for some shapes and worse for others
// there, so AMD gets none of these (but see line_prefetch_ahead below).
inline int64_t row_prefetch_distance() { return cpu_is_amd() ? 0 : 8192; }

// On AMD Zen 5 (family 0x1a) and later, the decode dot products ask for the line(s)
// 4 KB ahead of every 64 weights they read (non-temporal). The fp8 decode's 9
// instructions per 64 codes hold fewer loads in flight than a plain read, and a
// prefetch retires without waiting for its line. 2-core Zen 5 VM, one row, medians
// of 30-38 alternations against the fastest of 3 reads just before (the variant run
// second in a pair can gain or lose from its place, so both orders where two figures):
//  - fp8: 130048 x 4096 92 -> 103% and 95 -> 101% of the read (2 and 8 KB ahead:
//    94 and 98%); 43690 x 3072 84 -> 101%; 65536 x 2048 85 -> 89%; 151936 x 1024
//    80 -> 82% and 71 -> 70%; a Qwen3-0.6B fp8 decode step 51 -> 53% and 46 -> 46%;
//  - bf16, the read slow (32 GB/s): 151936 x 1024 99 -> 107% and 111 -> 115%;
//    130048 x 4096 121 -> 125% and 102 -> 106%; a Qwen3-0.6B decode step 73 -> 78%
//    and 80 -> 93%. The read fast (69 GB/s): 130048 x 4096 82 -> 80%; the decode
//    step 64 -> 74% and 69 -> 62% (each variant in one place each time): a gain
//    when memory is slow, within the noise when it is fast.
// The decode attention kernels ask the same for each bf16 K and V row as they
// reach it. 28 layers' caches in turn (so from DRAM), 16 q / 8 KV heads, d128,
// both orders: 2048 keys 445 -> 415 and 409 -> 397 us a layer (a first cut: 251 ->
// 226 and 322 -> 313; 2 and 8 KB ahead no better than 4); 512 keys 119 -> 120 us.
// On a 2-core Zen 4 VM (family 0x19) the same prefetches cost, in alternation:
// Qwen3-0.6B decode steps 22.5, 24.4, 22.7 tok/s with them against 27.8, 33.7, 25.0
// without (bf16, 128 context); fp8 44.4, 42.1, 42.3 against 49.9, 49.8, 48.7; 2048
// context 20.4 against 26.8; and rows of 1024 bf16 dotted in a loop, against a sum
// of the same bytes just before each (medians of 15): 0.75 against 0.95 of its
// GB/s (4096-wide rows: 0.85 against 0.97); fp8 rows of 2048 codes from DRAM on both
// cores, 33.5-35.2 GB/s of codes without against 27-29 with 1, 2, 4 or 8 KB ahead
// (non-temporal or T0; T1 26.5-33.3). So earlier AMD families get none.
// KILN_CPU_PREFETCH_AHEAD=bytes overrides the choice (0: none).
inline size_t line_prefetch_ahead() {
  static const size_t ahead =
      bytes_from_env("KILN_CPU_PREFETCH_AHEAD", cpu_is_amd() && cpu_family() >= 0x1a ? size_t{4096} : size_t{0});
  return ahead;
}

// Where the decode dot products' copy of the input row starts, in bytes past the
// weights' 64-byte phase (the input is re-read from L1 beside every weight row).
// On a 2-core Zen 4 VM (family 0x19), the input 32-byte aligned against the weights
// (0 or 32 past their phase) made the AVX512-BF16 dots slower than 16 or 48 past it
// (as though the two loads of a step met in L1's banks), one thread, 1 x 4096 ->
// 81920 from DRAM: bf16 18.5-21.3 GB/s at 0, 32, 1024 or 2048 bytes past against
// 22.8-25.1 at 16, 48 or 2064, beside a sum's 28.5-30.5; fp8 weights 18.1-20.4 at 0
// against 25.2-25.5 at 16. Both cores, against the read ceiling (`kiln bench`), with
// the input where the allocator put it against 16 past: bf16 69 -> 86% and 85 -> 99%,
// fp8 65 -> 89% and 89 -> 100% (the VM's read at 56 and 34 GB/s). A Qwen3-0.6B decode
// step (rows of 1024) is within the noise either way: bf16 87-90% of the read with and
// without (3 alternations). Elsewhere unmeasured: left where the allocator puts it.
// KILN_CPU_INPUT_PHASE=bytes overrides the choice (anything at or past 64: unplaced).
inline size_t decode_input_phase() {
  static const size_t phase =
      bytes_from_env("KILN_CPU_INPUT_PHASE", cpu_is_amd() && cpu_family() == 0x19 ? size_t{16} : size_t{64});
  return phase;
}

}  // namespace kiln::cpu
