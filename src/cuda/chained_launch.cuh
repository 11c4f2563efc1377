// Chained launches: Hopper's programmatic dependent launch for the kernels of a
// decode step. A decode step is a chain of some 700 small dependent kernels;
// launched plainly, each one starts only after the one before it has finished
// and its writes are flushed, so every link pays a launch and a ramp-up.
// launch_chained lets a kernel's blocks become resident while the kernel
// before it on the stream is still running:
//  - the kernel calls chain_wait() (every thread, before any early return)
//    before it reads anything earlier work wrote or writes anything earlier
//    work reads; before it, it may only read constants (weights) and prefetch;
//  - the kernel calls chain_release() once its own blocks have passed that
//    point, so the next chained kernel may be launched.
// A kernel that waits has waited for its predecessor's completion, so the
// guarantee carries down the chain. On GPUs before Hopper both calls are
// no-ops and the launch attribute is ignored (plain stream order).
// KILN_CHAINED_LAUNCH=0 in the environment launches plainly (to measure it, or
// to rule it out).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/common.h"

namespace kiln::cuda_backend {

__device__ __forceinline__ void chain_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void chain_release() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Brings the 16 bytes at p towards this SM (into L2) without waiting for them.
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Whether launches are chained (read once from KILN_CHAINED_LAUNCH).
bool chained_launch_enabled();

template <class... Params, class... Args>
void launch_chained(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = current_stream();
  cudaLaunchAttribute chained;
  chained.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  chained.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &chained;
  cfg.numAttrs = chained_launch_enabled() ? 1 : 0;
  KILN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace kiln::cuda_backend
