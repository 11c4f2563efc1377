// CPU grouped_mm: offsets read and checked on the host, one GEMM per group.
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
  args.out.zero_();
  int64_t start = 0;
  for (int64_t g = 0; g < G; ++g) {
    const int64_t end = o[g], len = end - start;
    if (len > 0) {
      if (by_k) args.out.select(0, g).copy_(gemm(args.a.narrow(1, start, len), args.b.narrow(0, start, len)));
      else args.out.narrow(0, start, len).copy_(gemm(args.a.narrow(0, start, len), args.b.select(0, g)));
    }
    start = end;
  }
}

}  // namespace kiln::cpu
