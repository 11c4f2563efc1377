#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "commands.h"
#include "core/allocator.h"
#include "cpu/blas_info.h"
#include "cpu/prefetch.h"
#include "kiln/kiln.h"

namespace kiln::tools {

namespace {
std::string cuda_version(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
}  // namespace

int doctor() {
  std::printf("kiln 0.1.0\n");
  // the environment's choice, when there is one: it overrides OpenBLAS's own (on a
  // Zen 5 machine, OPENBLAS_CORETYPE=Haswell runs float32 products at about 0.6x
  // the speed of the Cooperlake kernels OpenBLAS 0.3.21 picks itself)
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  std::printf("cpu: %d threads (OpenMP); %s, kernels %s%s\n", omp_get_max_threads(), cpu::openblas_config().c_str(),
              cpu::openblas_corename().c_str(), forced ? " (as OPENBLAS_CORETYPE asks)" : "");
  std::printf("cpu: x86 family 0x%x; decode kernels prefetch %zu bytes ahead (KILN_CPU_PREFETCH_AHEAD)\n",
              cpu::cpu_family(), cpu::line_prefetch_ahead());
  const size_t phase = cpu::decode_input_phase();
  if (phase < 64)
    std::printf("cpu: decode linears place their input %zu bytes past the weights' 64-byte phase (KILN_CPU_INPUT_PHASE)\n",
                phase);
  else
    std::printf("cpu: decode linears leave their input where the allocator puts it (KILN_CPU_INPUT_PHASE)\n");
  std::string thp = "unknown";  // the bracketed choice of "always [madvise] never"
  if (std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled"); f) {
    const std::string line((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t open = line.find('['), close = line.find(']');
    if (open != std::string::npos && close > open) thp = line.substr(open + 1, close - open - 1);
  }
  std::printf("cpu: blocks of 2 MB and more %s as transparent huge pages (KILN_CPU_HUGE_PAGES); the system's mode: %s\n",
              cpu_huge_pages_advised() ? "advised" : "not advised", thp.c_str());
  const auto& a = cuda::availability();
  std::printf("cuda: built %s; runtime %s; driver %s\n", cuda::built_with_cuda() ? "yes" : "no",
              cuda_version(a.runtime_version).c_str(), cuda_version(a.driver_version).c_str());
  if (!a.available) {
    std::printf("cuda: not available: %s\n", a.reason.c_str());
    return 0;
  }
  for (int i = 0; i < a.device_count; ++i) {
    const auto p = cuda::get_device_properties(i);
    std::printf("cuda:%d  %s  %.1f GiB  compute capability %d.%d  %d SMs  L2 %.0f MiB%s%s\n", i, p.name.c_str(),
                p.total_memory / 1073741824.0, p.major, p.minor, p.multiprocessors, p.l2_cache_bytes / 1048576.0,
                p.usable ? "" : "  NOT USABLE: ", p.reason.c_str());
  }
  return 0;
}

}  // namespace kiln::tools
