// CPU grouped_mm: offsets read and checked on the host, one GEMM per group
// (fp8 weights dequantised per group in float32).
#include "core/backend.h"
#include "core/check.h"

namespace kiln::cpu {

void grouped_mm(const GroupedMmArgs& args) {
  const Tensor& offs = args.offs;
  const int64_t G = offs.size(0);
  const int32_t* o = offs.data<int32_t>();
  const bool by_k = args.k_by_group();
  const int64_t extent = by_k ? args.a.size(1) : args.a.size(0);  // the jagged dim
  int64_t prev = 0;
  for (int64_t g = 0; g < G; ++g) {
    KILN_CHECK(o[g] >= prev && o[g] <= extent, "grouped_mm: offs must be non-decreasing and at most ", extent,
               " (the size of the split dim), got offs[", g, "] = ", o[g], " after ", prev);
    prev = o[g];
  }
  const bool widen = args.out.dtype() != args.a.dtype();
  auto gemm = [&](const Tensor& x, const Tensor& w) {
    return widen ? matmul(x.to(DType::Float32), w.to(DType::Float32)) : matmul(x, w);
  };
  // fp8 b: a group's weights dequantised in float32 (a @ (b * scale), as defined), only for groups with rows
  auto gemm_group = [&](const Tensor& x, int64_t g) {
    const Tensor w = args.b.select(0, g);
    if (!args.b_scale.defined()) return gemm(x, w);
    return matmul(x.to(DType::Float32), mul(w.to(DType::Float32), args.b_scale.select(0, g).unsqueeze(0)));
  };
  args.out.zero_();
  int64_t start = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t end = o[g], len = end - start;
    if (len > 0) {
      if (by_k) args.out.select(0, g).copy_(gemm(args.a.narrow(1, start, len), args.b.narrow(0, start, len)));
      else args.out.narrow(0, start, len).copy_(gemm_group(args.a.narrow(0, start, len), g));
    }
    start = end;
  }
}

}  // namespace kiln::cpu
