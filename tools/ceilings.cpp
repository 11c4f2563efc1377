#include "ceilings.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::tools {

int64_t llc_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? l3 : int64_t{32} << 20;
}

Tensor make_read_ceiling_input() {
  const int64_t bytes = std::max<int64_t>(2 * llc_bytes(), int64_t{512} << 20);
  return zeros({bytes / 4}, DType::Float32, kCPU);
}

void run_read_ceiling(const Tensor& input) { (void)sum(input).item<float>(); }

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
}  // namespace

ReadShare share_of_read(const Tensor& ceiling_input, double bytes, int pairs, const std::function<double()>& timed) {
  std::vector<double> shares, reads;
  for (int i = 0; i < pairs; ++i) {
    const double read_seconds = fastest_seconds(3, [&] { run_read_ceiling(ceiling_input); });
    const double read_gbps = static_cast<double>(ceiling_input.nbytes()) / read_seconds / 1e9;
    const double gbps = bytes / timed() / 1e9;
    reads.push_back(read_gbps);
    shares.push_back(gbps / read_gbps);
  }
  return {median(shares), median(reads)};
}

}  // namespace kiln::tools
