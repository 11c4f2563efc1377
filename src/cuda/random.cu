#include "core/backend.h"
#include "core/dispatch.h"
#include "core/random_math.h"
#include "cuda/map.cuh"

namespace kiln::cuda_backend {

namespace {
template <class T>
__global__ void random_kernel(T* out, int64_t n, bool normal, float a, float b, uint64_t seed, uint64_t offset) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = normal ? T(philox::normal_at(seed, offset, i, a, b)) : philox::uniform_at<T>(seed, offset, i, a, b);
}
}  // namespace

void random(RandomKind kind, const Tensor& out, double a, double b, uint64_t seed, uint64_t offset) {
  detail::dispatch_float(out.dtype(), kind == RandomKind::Uniform ? "rand" : "randn", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t n = out.numel();
    random_kernel<<<grid_for(n, kThreads), kThreads, 0, current_stream()>>>(
        out.data<T>(), n, kind == RandomKind::Normal, static_cast<float>(a), static_cast<float>(b), seed, offset);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda_backend
