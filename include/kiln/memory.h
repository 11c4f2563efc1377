// Allocator statistics and control (torch.cuda.memory_* analogues).
#pragma once

#include <cstddef>

#include "kiln/device.h"

namespace kiln {

struct MemoryStats {
  size_t allocated = 0;       // bytes in blocks handed to tensors
  size_t reserved = 0;        // bytes held from the system (cudaMalloc / aligned_alloc)
  size_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  size_t num_allocs = 0;      // allocation requests served
  size_t num_system_allocs = 0;  // of which needed a fresh cudaMalloc / aligned_alloc
};

MemoryStats memory_stats(Device device);
void reset_peak_memory_stats(Device device);
// Returns cached, unused blocks to the system (CUDA, or the CPU's cache of blocks
// of 1 MiB and more). CUDA blocks still waiting on another stream (record_stream)
// stay until that stream has passed them.
void empty_cache(Device device = Device("cuda"));

// Bytes a CPU allocation is aligned to.
inline constexpr size_t kCpuAlignment = 64;

}  // namespace kiln
