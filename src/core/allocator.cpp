#include "core/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/check.h"

namespace kiln {
namespace {

// The CPU allocator: aligned_alloc with statistics. The system allocator already
// caches, so there is no pool here.
struct CpuStats {
  std::mutex mu;
  MemoryStats s;
};
CpuStats& cpu_stats() {
  static CpuStats st;
  return st;
}

std::shared_ptr<Storage> allocate_cpu(size_t nbytes) {
  const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  void* p = nullptr;
  if (rounded > 0) {
    p = std::aligned_alloc(kCpuAlignment, rounded);
    KILN_CHECK(p != nullptr, "cpu allocator: out of memory allocating ", nbytes, " bytes");
  }
  {
    auto& st = cpu_stats();
    std::lock_guard<std::mutex> lock(st.mu);
    st.s.allocated += rounded;
    st.s.reserved += rounded;
    st.s.peak_allocated = std::max(st.s.peak_allocated, st.s.allocated);
    ++st.s.num_allocs;
    ++st.s.num_system_allocs;
  }
  return std::make_shared<Storage>(p, nbytes, kCPU, [rounded](void* q) {
    std::free(q);
    auto& st = cpu_stats();
    std::lock_guard<std::mutex> lock(st.mu);
    st.s.allocated -= rounded;
    st.s.reserved -= rounded;
  });
}

}  // namespace

std::shared_ptr<Storage> allocate_storage(size_t nbytes, Device device) {
  if (device.is_cpu()) return allocate_cpu(nbytes);
  return cuda_backend::allocate(nbytes, device.index);
}

MemoryStats memory_stats(Device device) {
  if (device.is_cuda()) return cuda_backend::memory_stats(device.index);
  auto& st = cpu_stats();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.s;
}

void reset_peak_memory_stats(Device device) {
  if (device.is_cuda()) return cuda_backend::reset_peak_memory_stats(device.index);
  auto& st = cpu_stats();
  std::lock_guard<std::mutex> lock(st.mu);
  st.s.peak_allocated = st.s.allocated;
}

void empty_cache(Device device) {
  if (device.is_cuda()) cuda_backend::empty_cache(device.index);
}

}  // namespace kiln
