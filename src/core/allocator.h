// Memory for tensors: a 64-byte-aligned allocator on the CPU and the caching
// allocator on CUDA (src/cuda/allocator.cpp).
#pragma once

#include <memory>
#include <optional>

#include "kiln/memory.h"
#include "kiln/stream.h"
#include "kiln/tensor.h"

namespace kiln {

std::shared_ptr<Storage> allocate_storage(size_t nbytes, Device device);

// Bytes the CPU allocator could still hand out before the system runs out: the kernel's
// MemAvailable and SwapFree (Linux's /proc/meminfo) plus kiln's cached free blocks; none
// where the system does not say. The C library's allocations succeed past that
// (overcommit) and the process is then killed as pages are touched, so the CPU
// allocator checks large requests against it, and work that knows its total size ahead
// (a model's weights, built tensor by tensor) checks it first.
std::optional<size_t> cpu_available_bytes();
// Whether the CPU allocator advises transparent huge pages for blocks of 2 MB and more
// (all but KILN_CPU_HUGE_PAGES=0 in the environment, read once).
bool cpu_huge_pages_advised();

namespace cuda_backend {
// A block from the cache for the current stream of `device`, or a fresh cudaMalloc.
std::shared_ptr<Storage> allocate(size_t nbytes, int device);
// The block holding `ptr` is not reused until `stream` passes this point.
void record_stream(void* ptr, const Stream& stream);
MemoryStats memory_stats(int device);
void reset_peak_memory_stats(int device);
void empty_cache(int device);
// While reserved, the cached blocks of `stream` are never released (empty_cache,
// the retry after a failed cudaMalloc): a CUDA graph captured on it uses them.
void set_stream_reserved(int device, void* stream, bool reserved);
}  // namespace cuda_backend

}  // namespace kiln
