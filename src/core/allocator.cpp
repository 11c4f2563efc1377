#include "core/allocator.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "core/check.h"
#include "core/env.h"

namespace kiln {
namespace {

// The CPU allocator: 64-byte-aligned blocks with statistics. Blocks of 1 MiB and
// more are cached after use (up to kCpuCacheLimit bytes): the C library returns
// those to the system at free(), and touching fresh pages made page faults the
// cost of every large op (measured: a 64 MB clone at 3.9 GB/s).
constexpr size_t kCpuCacheMin = size_t{1} << 20;
constexpr size_t kCpuCacheLimit = size_t{2} << 30;
// Blocks of 2 MB and more are 2 MB-aligned and marked for transparent huge pages
// (madvise; Debian leaves THP at "madvise"). With 4 KB pages, a stream through a large
// tensor takes a TLB miss every 4 KB. On this file's 2-core VM, on against off,
// alternated in one session: a read past the LLC 11.1-11.6 against 15.1-15.7 ms (kiln
// bench); the Qwen3-0.6B bf16 decode, 7 pairs, median 37.3 against 33.3 tok/s (30.6-38.5
// against 25.1-34.8). The environment's KILN_CPU_HUGE_PAGES=0 turns it off.
constexpr size_t kHugePage = size_t{2} << 20;
// Allocations this large are checked against the memory available first: past it, the
// system still grants them (overcommit) and kills the process as their pages are touched.
constexpr size_t kCpuCheckedMin = size_t{256} << 20;

struct CpuPool {
  std::mutex mu;
  MemoryStats s;
  std::multimap<size_t, void*> free_blocks;  // size -> block
  size_t cached = 0;
};
CpuPool& cpu_pool() {
  static CpuPool* pool = new CpuPool();  // never destroyed: storages may outlive static destructors
  return *pool;
}

// Whether a block of n bytes is 2 MB-aligned and advised as huge pages.
bool huge_page_block(size_t n) { return n >= kHugePage && cpu_huge_pages_advised(); }

// Huge-page blocks round to whole 2 MB pages, so the block, the stats and the cache's
// size keys all count what the system gave.
size_t round_cpu(size_t nbytes) {
  if (huge_page_block(nbytes)) return (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  if (nbytes >= kCpuCacheMin) return (nbytes + kCpuCacheMin - 1) / kCpuCacheMin * kCpuCacheMin;
  return (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
}

void release_cpu(void* q, size_t rounded) {
  auto& st = cpu_pool();
  std::lock_guard<std::mutex> lock(st.mu);
  st.s.allocated -= rounded;
  if (rounded >= kCpuCacheMin && st.cached + rounded <= kCpuCacheLimit) {
    st.free_blocks.emplace(rounded, q);
    st.cached += rounded;
    return;
  }
  st.s.reserved -= rounded;
  std::free(q);
}

std::shared_ptr<Storage> allocate_cpu(size_t nbytes) {
  const size_t rounded = round_cpu(nbytes);
  void* p = nullptr;
  auto& st = cpu_pool();
  {
    std::lock_guard<std::mutex> lock(st.mu);
    ++st.s.num_allocs;
    if (rounded >= kCpuCacheMin) {
      auto it = st.free_blocks.find(rounded);
      if (it != st.free_blocks.end()) {
        p = it->second;
        st.free_blocks.erase(it);
        st.cached -= rounded;
      }
    }
    if (p) {
      st.s.allocated += rounded;
      st.s.peak_allocated = std::max(st.s.peak_allocated, st.s.allocated);
    }
  }
  if (!p && rounded >= kCpuCheckedMin) {  // one the system would grant and then kill the process over
    std::optional<size_t> available = cpu_available_bytes();
    if (available && rounded > *available) {
      empty_cache(kCPU);
      available = cpu_available_bytes();
    }
    KILN_CHECK(!available || rounded <= *available, "cpu allocator: out of memory allocating ", nbytes,
               " bytes: the system has ", *available, " available (MemAvailable, free swap and kiln's cache)");
  }
  if (!p && rounded > 0) {
    const auto system_alloc = [&] {
      if (huge_page_block(rounded)) {
        if (void* q = std::aligned_alloc(kHugePage, rounded)) {
          madvise(q, rounded, MADV_HUGEPAGE);  // advice only: a refusal leaves 4 KB pages
          return q;
        }
      }
      return std::aligned_alloc(kCpuAlignment, rounded);
    };
    p = system_alloc();
    if (!p) {  // give the cache back to the system and try once more
      empty_cache(kCPU);
      p = system_alloc();
    }
    KILN_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
    std::lock_guard<std::mutex> lock(st.mu);
    st.s.allocated += rounded;
    st.s.reserved += rounded;
    st.s.peak_allocated = std::max(st.s.peak_allocated, st.s.allocated);
    ++st.s.num_system_allocs;
  }
  return std::make_shared<Storage>(p, nbytes, kCPU, [rounded](void* q) {
    if (q) release_cpu(q, rounded);
  });
}

}  // namespace

bool cpu_huge_pages_advised() {
  static const bool wanted = env_switch_on("KILN_CPU_HUGE_PAGES");
  return wanted;
}

std::optional<size_t> cpu_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  unsigned long long available_kb = 0, swap_kb = 0, kb = 0;  // lines like "MemAvailable:   21051104 kB"
  bool found = false;
  for (std::string line; std::getline(meminfo, line);) {
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kb) == 1) available_kb = kb, found = true;
    else if (std::sscanf(line.c_str(), "SwapFree: %llu kB", &kb) == 1) swap_kb = kb;
  }
  if (!found) return std::nullopt;
  auto& st = cpu_pool();
  std::lock_guard<std::mutex> lock(st.mu);
  return static_cast<size_t>(available_kb + swap_kb) * 1024 + st.cached;
}

std::shared_ptr<Storage> allocate_storage(size_t nbytes, Device device) {
  if (device.is_cpu()) return allocate_cpu(nbytes);
  return cuda_backend::allocate(nbytes, device.index);
}

MemoryStats memory_stats(Device device) {
  if (device.is_cuda()) return cuda_backend::memory_stats(device.index);
  auto& st = cpu_pool();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.s;
}

void reset_peak_memory_stats(Device device) {
  if (device.is_cuda()) return cuda_backend::reset_peak_memory_stats(device.index);
  auto& st = cpu_pool();
  std::lock_guard<std::mutex> lock(st.mu);
  st.s.peak_allocated = st.s.allocated;
}

void empty_cache(Device device) {
  if (device.is_cuda()) return cuda_backend::empty_cache(device.index);
  auto& st = cpu_pool();
  std::lock_guard<std::mutex> lock(st.mu);
  for (auto& [size, block] : st.free_blocks) {
    std::free(block);
    st.s.reserved -= size;
  }
  st.free_blocks.clear();
  st.cached = 0;
}

}  // namespace kiln
