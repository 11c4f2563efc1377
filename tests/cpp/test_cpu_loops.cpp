// The CPU's parallel loops: every index handed out exactly once.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cpu/loops.h"

namespace {

// Counts how often each index of [0, n) reaches fn; thread 0 sleeps in its first
// block, so that the others finish their shares and take blocks from its back.
std::vector<int> balanced_counts(int64_t n, int64_t block) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<bool> slept{false};
  kiln::cpu::parallel_for_balanced(n, block, [&](int64_t b, int64_t e) {
    EXPECT_LE(e - b, block);
    if (omp_get_thread_num() == 0 && !slept.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

TEST(CpuLoops, BalancedForCoversEveryIndexOnce) {
  for (int64_t n : {0, 1, 7, 64, 1000, 4099})
    for (int64_t block : {1, 3, 64, 5000}) {
      const std::vector<int> counts = balanced_counts(n, block);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(counts[static_cast<size_t>(i)], 1) << "n " << n << " block " << block << " index " << i;
    }
}

TEST(CpuLoops, BalancedForStealsFromASlowThread) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "one OpenMP thread";
  // with thread 0 asleep in its first block, the other threads run the rest of its share
  std::atomic<int64_t> by_others{0};
  std::atomic<bool> slept{false};
  const int64_t n = 1000;
  kiln::cpu::parallel_for_balanced(n, 1, [&](int64_t b, int64_t e) {
    if (omp_get_thread_num() == 0) {
      if (!slept.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } else {
      by_others += e - b;
    }
  });
  const int64_t share0 = n / omp_get_max_threads();
  EXPECT_GT(by_others.load(), n - share0) << "nothing was taken from the sleeping thread's share";
}

}  // namespace
