// Philox4x32-10 counter-based generator (Salmon et al., SC'11). Every element's
// numbers depend only on (seed, counter), so the CPU and CUDA backends produce
// the same values for the same seed, and threads need no shared state.
#pragma once

#include <cstdint>

#include "kiln/scalar_types.h"  // KILN_HD

namespace kiln::philox {

struct U4 {
  uint32_t x[4];
};

KILN_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t& hi) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Four 32-bit outputs for the 128-bit counter (ctr_lo, ctr_hi) under a 64-bit key.
KILN_HD U4 philox4x32_10(uint64_t ctr_lo, uint64_t ctr_hi, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(ctr_lo), c1 = static_cast<uint32_t>(ctr_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(ctr_hi), c3 = static_cast<uint32_t>(ctr_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    const uint32_t lo0 = mulhilo(0xD2511F53u, c0, hi0);
    const uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, hi1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return U4{{c0, c1, c2, c3}};
}

// uniform float in [0, 1) from 24 random bits
KILN_HD float to_unit_float(uint32_t v) { return static_cast<float>(v >> 8) * (1.0f / 16777216.0f); }

}  // namespace kiln::philox
