// The CPU allocator behind Storage: 64-byte aligned blocks, with large blocks cached for reuse.
// A training step allocates the same large sizes every iteration; handing each back to the OS
// and faulting fresh pages in again cost as much as the convolution itself on the dev VM (see
// tools/bench/RESULTS.md). Blocks of at least kCacheMinBytes go to a size-keyed free list
// instead, up to a cap; the rest use the C allocator directly.
//   set_cpu_cache_limit(1 << 30);   CpuMemoryStats s = cpu_memory_stats();   release_cpu_cache();
#pragma once

#include <cstddef>
#include <cstdint>

namespace octet {

struct CpuMemoryStats {
  size_t allocated = 0;       // bytes in live storages
  size_t peak_allocated = 0;  // high-water mark of `allocated` since start or reset_cpu_peak()
  size_t cached = 0;          // bytes held in the free lists
};

void* cpu_alloc(size_t nbytes);
void cpu_free(void* p, size_t nbytes);

// Bytes the cache may hold (default 2 GiB); lowering it releases blocks beyond the new cap.
void set_cpu_cache_limit(size_t bytes);
// Returns every cached block to the system.
void release_cpu_cache();
CpuMemoryStats cpu_memory_stats();
// Starts a new high-water mark at the bytes allocated now (a step's peak: reset, step, read).
void reset_cpu_peak();

}  // namespace octet
