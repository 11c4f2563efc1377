// The CUDA caching allocator.
//
// Requests are rounded to a size class (512 B steps below 1 MiB, then 2 MiB
// steps), and a freed block goes back to a free list of its device and the
// stream it was allocated on: work on that stream is ordered, so the next
// allocation on the same stream may reuse it at once. A block that another
// stream used (record_stream) is held until an event recorded on each such
// stream at free time has completed. When cudaMalloc fails, the cache is
// released and the allocation retried once.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/allocator.h"
#include "core/backend.h"
#include "cuda/common.h"

namespace kiln::cuda_backend {

namespace {

constexpr size_t kSmallStep = 512;
constexpr size_t kSmallLimit = 1 << 20;
constexpr size_t kLargeStep = 2 << 20;

size_t size_class(size_t n) {
  if (n == 0) n = 1;
  if (n <= kSmallLimit) return (n + kSmallStep - 1) / kSmallStep * kSmallStep;
  return (n + kLargeStep - 1) / kLargeStep * kLargeStep;
}

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  int device = 0;
  cudaStream_t stream = nullptr;             // allocated on
  std::unordered_set<cudaStream_t> users;    // other streams from record_stream
  std::vector<cudaEvent_t> pending;          // events those streams must pass
};

struct DeviceCache {
  // (stream, size) -> free blocks
  std::map<std::pair<cudaStream_t, size_t>, std::vector<Block*>> free;
  std::vector<Block*> waiting;  // freed, but other streams may still use them
  MemoryStats stats;
};

class CachingAllocator {
 public:
  void* allocate(size_t nbytes, int device, cudaStream_t stream) {
    const size_t sz = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    DeviceCache& c = cache(device);
    reclaim_waiting(c);
    ++c.stats.num_allocs;
    auto it = c.free.find({stream, sz});
    Block* b = nullptr;
    if (it != c.free.end() && !it->second.empty()) {
      b = it->second.back();
      it->second.pop_back();
    } else {
      void* p = nullptr;
      cudaError_t err = cudaMalloc(&p, sz);
      if (err == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        release_free(c);
        err = cudaMalloc(&p, sz);
      }
      if (err != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        throw Error(detail::format("CUDA out of memory: tried to allocate ", sz, " bytes on cuda:", device, " (",
                                   free_b, " of ", total_b, " bytes free; kiln holds ", c.stats.reserved, ")"));
      }
      b = new Block();
      b->ptr = p;
      b->size = sz;
      b->device = device;
      b->stream = stream;
      c.stats.reserved += sz;
      ++c.stats.num_system_allocs;
    }
    live_[b->ptr] = b;
    c.stats.allocated += sz;
    c.stats.peak_allocated = std::max(c.stats.peak_allocated, c.stats.allocated);
    return b->ptr;
  }

  void release(void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    Block* b = it->second;
    live_.erase(it);
    DeviceCache& c = cache(b->device);
    c.stats.allocated -= b->size;
    if (b->users.empty()) {
      c.free[{b->stream, b->size}].push_back(b);
      return;
    }
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(b->device);
    for (cudaStream_t s : b->users) {
      cudaEvent_t e;
      cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      cudaEventRecord(e, s);
      b->pending.push_back(e);
    }
    if (prev >= 0) cudaSetDevice(prev);
    b->users.clear();
    c.waiting.push_back(b);
  }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    KILN_CHECK(it != live_.end(), "record_stream: the tensor's memory does not come from kiln's CUDA allocator");
    if (stream != it->second->stream) it->second->users.insert(stream);
  }

  MemoryStats stats(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return cache(device).stats;
  }
  void reset_peak(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& s = cache(device).stats;
    s.peak_allocated = s.allocated;
  }
  void empty_cache(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceCache& c = cache(device);
    reclaim_waiting(c);
    release_free(c);
  }
  void set_reserved(cudaStream_t stream, bool reserved) {
    std::lock_guard<std::mutex> lock(mu_);
    if (reserved) reserved_.insert(stream);
    else reserved_.erase(stream);
  }

 private:
  DeviceCache& cache(int device) { return devices_[device]; }

  // Moves waiting blocks whose events have all completed to the free lists.
  void reclaim_waiting(DeviceCache& c) {
    for (size_t i = 0; i < c.waiting.size();) {
      Block* b = c.waiting[i];
      bool done = true;
      for (cudaEvent_t e : b->pending) {
        const cudaError_t q = cudaEventQuery(e);
        if (q == cudaErrorNotReady) {
          done = false;
          break;
        }
      }
      cudaGetLastError();
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t e : b->pending) cudaEventDestroy(e);
      b->pending.clear();
      c.free[{b->stream, b->size}].push_back(b);
      c.waiting[i] = c.waiting.back();
      c.waiting.pop_back();
    }
  }

  void release_free(DeviceCache& c) {
    for (auto it = c.free.begin(); it != c.free.end();) {
      if (reserved_.count(it->first.first)) {  // a captured graph's memory
        ++it;
        continue;
      }
      for (Block* b : it->second) {
        int prev = -1;
        cudaGetDevice(&prev);
        cudaSetDevice(b->device);
        cudaFree(b->ptr);
        if (prev >= 0) cudaSetDevice(prev);
        c.stats.reserved -= b->size;
        delete b;
      }
      it = c.free.erase(it);
    }
  }

  std::mutex mu_;
  std::unordered_map<int, DeviceCache> devices_;
  std::unordered_map<void*, Block*> live_;
  std::unordered_set<cudaStream_t> reserved_;
};

// Never destroyed: tensors freed during static destruction still find it.
CachingAllocator& instance() {
  static auto* a = new CachingAllocator();
  return *a;
}

}  // namespace

std::shared_ptr<Storage> allocate(size_t nbytes, int device) {
  DeviceGuard g(device);
  void* p = instance().allocate(nbytes, device, current_stream());
  return std::make_shared<Storage>(p, nbytes, Device(DeviceType::CUDA, device), [](void* q) { instance().release(q); });
}

void record_stream(void* ptr, const Stream& stream) {
  instance().record_stream(ptr, static_cast<cudaStream_t>(stream.native()));
}
MemoryStats memory_stats(int device) { return instance().stats(device); }
void reset_peak_memory_stats(int device) { instance().reset_peak(device); }
void empty_cache(int device) { instance().empty_cache(device); }
void set_stream_reserved(int, void* stream, bool reserved) {
  instance().set_reserved(static_cast<cudaStream_t>(stream), reserved);
}

}  // namespace kiln::cuda_backend
