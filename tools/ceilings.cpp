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

uint64_t run_read_ceiling(const Tensor& input) {
  // eight loads a pass and an OR, no float conversions or add latency between
  // them: only the memory sets the pace
  const auto* words = static_cast<const uint64_t*>(input.data_ptr());
  const int64_t n = input.nbytes() / 8;
  uint64_t any = 0;
#pragma omp parallel for schedule(static) reduction(| : any)
  for (int64_t i = 0; i < n / 8 * 8; i += 8) {
    uint64_t lanes[8];
    for (int j = 0; j < 8; ++j) lanes[j] = words[i + j];
    for (int j = 1; j < 8; ++j) lanes[0] |= lanes[j];
    any |= lanes[0];
  }
  return any;
}

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
