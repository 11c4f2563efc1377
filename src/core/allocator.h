// Memory for tensors: a 64-byte-aligned allocator on the CPU and the caching
// allocator on CUDA (src/cuda/allocator.cpp).
#pragma once

#include <memory>

#include "kiln/memory.h"
#include "kiln/stream.h"
#include "kiln/tensor.h"

namespace kiln {

std::shared_ptr<Storage> allocate_storage(size_t nbytes, Device device);

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
