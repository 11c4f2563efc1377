// Hopper's warpgroup tensor-core products (PTX ISA: wgmma.mma_async), for sm_90a
// code only (launchers check device_arch() first): a warpgroup (4 warps, 128
// threads) computes D[64 x N] (+)= A[64 x 16] B[16 x N] with A in registers (per
// warp: the mma.m16n8k16 A fragment of its 16 rows) and B in shared memory, read
// through a matrix descriptor. D is N / 2 floats a thread: per warp and 8-column
// block n, the mma.m16n8 C fragment {(g, 8n+2t), (g, 8n+2t+1), (g+8, 8n+2t),
// (g+8, 8n+2t+1)}. B without swizzling is made of 128-byte core matrices of 8
// rows x 16 bytes; `lbo` is the byte distance between core matrices along k and
// `sbo` along n, for K-major B (transpose_b false: k contiguous within a core
// matrix's rows) and N-major B (n contiguous) alike: the PTX ISA's canonical
// no-swizzle layouts, ((8,n),(T,2k)):((1T,SBO),(1,LBO)) and
// ((T,1,n),(8,k)):((1,T,SBO),(1T,LBO)). Inline asm takes one operand a register,
// so each N has its operand list spelled out (KILN_WGMMA_RS_ALL below).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kiln/scalar_types.h"

namespace kiln::cuda_backend {

// Descriptor of a no-swizzle B operand at shared address `addr` (16-byte aligned).
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16 |
         static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32;
}

#if __CUDA_ARCH__ >= 900
// Orders this thread's register writes (accumulators, A fragments) before the next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed groups are in flight; their D registers are then final.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pins the accumulators to this point of the program: the compiler sees them read and
// written here, so it can neither move their uses above a wgmma_wait nor their
// definitions below a wgmma that reads them (it knows nothing of wgmma's asynchrony).
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Makes this thread's generic-proxy writes to shared memory (cp.async included)
// visible to wgmma's reads, which go through the async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

template <int N, class T, bool kTransB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate);

// Accumulator operands d[i..i+3], and the lists of N / 2 of them.
#define KILN_WGMMA_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define KILN_WGMMA_D20 KILN_WGMMA_D4(0), KILN_WGMMA_D4(4), KILN_WGMMA_D4(8), KILN_WGMMA_D4(12), KILN_WGMMA_D4(16)
#define KILN_WGMMA_D32 KILN_WGMMA_D20, KILN_WGMMA_D4(20), KILN_WGMMA_D4(24), KILN_WGMMA_D4(28)
#define KILN_WGMMA_D40 KILN_WGMMA_D32, KILN_WGMMA_D4(32), KILN_WGMMA_D4(36)
#define KILN_WGMMA_D48 KILN_WGMMA_D40, KILN_WGMMA_D4(40), KILN_WGMMA_D4(44)
#define KILN_WGMMA_D64 KILN_WGMMA_D48, KILN_WGMMA_D4(48), KILN_WGMMA_D4(52), KILN_WGMMA_D4(56), KILN_WGMMA_D4(60)
// One specialisation: m64nNk16 with f32 accumulators, A (type TY) from registers, B through
// its descriptor, transposed or not (TRANS 0 / 1); REGS numbers the N / 2 accumulators, and
// A's registers, the descriptor and the scale-d flag follow them (AREGS, PRED).
#define KILN_WGMMA_RS(N, CT, TY, TRANS, REGS, AREGS, PRED, ...)                                                 \
  template <>                                                                                                   \
  __device__ __forceinline__ void wgmma_rs<N, CT, TRANS>(float(&d)[N / 2], const uint32_t(&a)[4],               \
                                                         uint64_t desc_b, bool accumulate) {                    \
    asm volatile("{.reg .pred p; setp.ne.b32 p, " PRED ", 0;\n"                                                 \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS "}, " AREGS              \
                 ", p, 1, 1, " #TRANS ";}"                                                                      \
                 : __VA_ARGS__                                                                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate))); \
  }
// The four of one N: float16 and bfloat16, B K-major and N-major.
#define KILN_WGMMA_RS_ALL(N, REGS, AREGS, PRED, ...)                    \
  KILN_WGMMA_RS(N, Half, "f16", 0, REGS, AREGS, PRED, __VA_ARGS__)      \
  KILN_WGMMA_RS(N, Half, "f16", 1, REGS, AREGS, PRED, __VA_ARGS__)      \
  KILN_WGMMA_RS(N, BFloat16, "bf16", 0, REGS, AREGS, PRED, __VA_ARGS__) \
  KILN_WGMMA_RS(N, BFloat16, "bf16", 1, REGS, AREGS, PRED, __VA_ARGS__)

KILN_WGMMA_RS_ALL(40, "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19", "{%20,%21,%22,%23}, %24", "%25",
                  KILN_WGMMA_D20)
KILN_WGMMA_RS_ALL(64, "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31", "{%32,%33,%34,%35}, %36", "%37",
                  KILN_WGMMA_D32)
KILN_WGMMA_RS_ALL(80, "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39", "{%40,%41,%42,%43}, %44", "%45",
                  KILN_WGMMA_D40)
KILN_WGMMA_RS_ALL(96, "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47", "{%48,%49,%50,%51}, %52", "%53",
                  KILN_WGMMA_D48)
KILN_WGMMA_RS_ALL(128, "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63", "{%64,%65,%66,%67}, %68", "%69",
                  KILN_WGMMA_D64)

#undef KILN_WGMMA_RS_ALL
#undef KILN_WGMMA_RS
#undef KILN_WGMMA_D64
#undef KILN_WGMMA_D48
#undef KILN_WGMMA_D40
#undef KILN_WGMMA_D32
#undef KILN_WGMMA_D20
#undef KILN_WGMMA_D4
#endif

}  // namespace kiln::cuda_backend
