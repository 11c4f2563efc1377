// kiln bench: times kiln's ops alone on one device and prints the same table as
// bench/bench.py (which adds PyTorch beside it on a GPU machine).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "ceilings.h"
#include "commands.h"
#include "core/check.h"
#include "kiln/kiln.h"

namespace kiln::tools {

namespace {

struct Case {
  std::string name;
  double bytes;  // fewest bytes the op must move
  double flops;  // 0 for memory-bound cases
  std::function<void()> run;
  bool vs_read = false;  // a decode linear: held to the read ceiling where one is measured
};

double median_us(Device dev, const std::function<void()>& fn, int repeats) {
  for (int i = 0; i < 3; ++i) fn();  // warm-up: allocator cache, cuBLAS handles
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    if (dev.is_cuda()) {
      Event start(dev), end(dev);
      start.record();
      fn();
      end.record();
      end.synchronize();
      t.push_back(start.elapsed_time(end) * 1000.0);
    } else {
      t.push_back(wall_seconds(fn) * 1e6);
    }
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// read_input: the buffer of the CPU's read ceiling (undefined on a GPU)
std::vector<Case> make_cases(Device dev, double scale, const Tensor& read_input) {
  const int64_t N =
      std::max<int64_t>(4096, static_cast<int64_t>((dev.is_cuda() ? (1 << 26) : (1 << 24)) * scale) / 4096 * 4096);
  const int64_t cols = 4096, rows = N / cols;
  auto x32 = randn({N}, float32, dev), y32 = randn({N}, float32, dev);
  auto x16 = randn({N}, bfloat16, dev), y16 = randn({N}, bfloat16, dev);
  auto m32 = x32.view({rows, cols}), m16 = x16.view({rows, cols});
  auto row = randn({cols}, float32, dev);
  const int64_t mm = dev.is_cuda() ? 4096 : 1024;
  auto A = randn({mm, mm}, bfloat16, dev), B = randn({mm, mm}, bfloat16, dev);
  auto A32 = randn({mm, mm}, float32, dev), B32 = randn({mm, mm}, float32, dev);
  const double f4 = 4.0 * N, f2 = 2.0 * N;
  // decode linear: one row against a weight bigger than the last-level cache (on the
  // CPU at least twice its size: a 2-core VM has 260 MB of L3)
  const int64_t lk = 4096;
  int64_t ln = std::max<int64_t>(256, static_cast<int64_t>(8192 * scale) / 256 * 256);
  if (dev.is_cpu()) ln = std::max(ln, (2 * llc_bytes() / (2 * lk) + 255) / 256 * 256);
  auto lx = randn({1, lk}, bfloat16, dev), lw = randn({ln, lk}, bfloat16, dev);
  auto lw8 = lw.to(float8_e4m3fn);
  auto ls = full({ln}, 0.01, float32, dev);
  std::vector<Case> c;
  c.push_back({"copy f32 (clone)", 2 * f4, 0, [=] { x32.clone(); }});
  if (dev.is_cpu()) {  // the ceiling of a decode step (tools/ceilings.h)
    c.push_back({"read (words past the LLC)", static_cast<double>(read_input.nbytes()), 0,
                 [=] { run_read_ceiling(read_input); }});
  }
  c.push_back({"add f32", 3 * f4, 0, [=] { add(x32, y32); }});
  c.push_back({"mul bf16", 3 * f2, 0, [=] { mul(x16, y16); }});
  c.push_back({"add f32 row-broadcast", 2 * f4, 0, [=] { add(m32, row); }});
  c.push_back({"mul f32 by scalar", 2 * f4, 0, [=] { mul(x32, 0.5); }});
  c.push_back({"exp f32", 2 * f4, 0, [=] { exp(x32); }});
  c.push_back({"silu bf16", 2 * f2, 0, [=] { silu(x16); }});
  c.push_back({"gelu f32", 2 * f4, 0, [=] { gelu(x32); }});
  c.push_back({"lt f32 -> bool", f4 * 2 + N, 0, [=] { lt(x32, y32); }});
  c.push_back({"cast f32->bf16", f4 + f2, 0, [=] { x32.to(bfloat16); }});
  c.push_back({"cast bf16->fp8e4m3", f2 + N, 0, [=] { x16.to(float8_e4m3fn); }});
  c.push_back({"sum f32 all", f4, 0, [=] { sum(x32); }});
  c.push_back({"sum f32 [R,4096] dim=-1", f4, 0, [=] { sum(m32, {-1}); }});
  c.push_back({"sum f32 [R,4096] dim=0", f4, 0, [=] { sum(m32, {0}); }});
  c.push_back({"amax bf16 dim=-1", f2, 0, [=] { amax(m16, {-1}); }});
  c.push_back({"argmax f32 dim=-1", f4, 0, [=] { argmax(m32, -1); }});
  c.push_back({"mean bf16 all", f2, 0, [=] { mean(x16); }});
  c.push_back({"linear bf16 1x4096->" + std::to_string(ln), 2.0 * ln * lk, 0, [=] { linear(lx, lw); }, true});
  c.push_back({"linear fp8w 1x4096->" + std::to_string(ln), 1.0 * ln * lk, 0,
               [=] { linear(lx, lw8, std::nullopt, ls); }, true});
  // one-query attention over a 2048-token cache, Qwen3-0.6B's heads (16 q, 8 KV, 128):
  // its 8 MB stay in the last-level cache across repeats, as one layer's would not
  auto aq = randn({1, 16, 128}, bfloat16, dev), akv = randn({1, 8, 2048, 128}, bfloat16, dev);
  auto alen = full({1}, 2048, int32, dev);
  c.push_back({"attn decode bf16 2048 cached", 2.0 * akv.nbytes(), 0, [=] { attention_decode_cache(aq, akv, akv, alen); }});
  c.push_back({"transpose copy f32", 2 * f4, 0, [=] { m32.t().contiguous(); }});
  c.push_back({"matmul bf16 " + std::to_string(mm), 6.0 * mm * mm, 2.0 * mm * mm * mm, [=] { matmul(A, B); }});
  c.push_back({"matmul f32 " + std::to_string(mm), 12.0 * mm * mm, 2.0 * mm * mm * mm, [=] { matmul(A32, B32); }});
  return c;
}

}  // namespace

int bench(const BenchOptions& opts) {
  KILN_CHECK(opts.repeats >= 1, "bench: --repeats must be at least 1, got ", opts.repeats);
  // up to 1024: the sizes stay well inside int64 (and fail as allocations where too large)
  KILN_CHECK(std::isfinite(opts.scale) && opts.scale > 0 && opts.scale <= 1024,
             "bench: --scale must be a number in (0, 1024], got ", opts.scale);
  const Device dev = pick_device(opts.device);
  if (dev.is_cuda() && !cuda::is_available())
    throw Error("bench: CUDA is not available: " + cuda::availability().reason);
  std::printf("kiln bench on %s%s\n", dev.str().c_str(),
              dev.is_cuda() ? (" (" + cuda::get_device_properties(dev.index).name + ")").c_str() : "");
  const Tensor read_input = dev.is_cpu() ? make_read_ceiling_input() : Tensor();
  auto cases = make_cases(dev, opts.scale, read_input);
  // GB/s of the copy case (the measured memory ceiling) and, on the CPU, of the read case
  double ceiling = 0, read_ceiling = 0;
  std::printf("%-28s %12s %10s %8s %10s\n", "case", "kiln us", "GB/s", "%ceil", "TFLOP/s");
  for (auto& c : cases) {
    const bool is_copy = c.name.rfind("copy", 0) == 0, is_read = c.name.rfind("read", 0) == 0;
    if (!is_copy && !is_read && !opts.filter.empty() && c.name.find(opts.filter) == std::string::npos) continue;
    const double us = median_us(dev, c.run, opts.repeats);
    const double gbs = c.bytes / us / 1e3;
    if (is_copy) ceiling = gbs;
    if (is_read) read_ceiling = gbs;
    double share = gbs / (is_read ? read_ceiling : ceiling);
    if (c.vs_read && dev.is_cpu())  // against the fastest of 3 read runs just before each call (tools/ceilings.h)
      share = share_of_read(read_input, c.bytes, opts.repeats, [&] { return wall_seconds(c.run); }).share;
    std::printf("%-28s %12.1f %10.1f %7.0f%% %10s\n", c.name.c_str(), us, gbs, 100 * share,
                c.flops > 0 ? std::to_string(c.flops / us / 1e6).substr(0, 6).c_str() : "-");
  }
  std::printf("%%ceil: against the copy case%s\n",
              dev.is_cpu() ? "; the read case and the decode linears against the read ceiling (the linears: the median "
                             "of their runs' ratios to the fastest of 3 read runs just before each)"
                           : "");
  return 0;
}

}  // namespace kiln::tools
