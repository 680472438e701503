#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.h"

namespace octet {

namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kCacheMinBytes = size_t{1} << 20;
// Large blocks are rounded up to this granule so that nearby sizes share a free list.
constexpr size_t kGranule = size_t{1} << 16;

struct Cache {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;  // by rounded size
  size_t cached = 0, allocated = 0, peak = 0;
  size_t limit = size_t{2} << 30;

  // Frees cached blocks, largest first, until the cache fits in `cap`. Caller holds the lock.
  void shrink_to(size_t cap) {
    while (cached > cap && !free_blocks.empty()) {
      auto it = std::prev(free_blocks.end());
      cached -= it->first;
      std::free(it->second);
      free_blocks.erase(it);
    }
  }
};

Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: storages may outlive static destruction
  return *c;
}

size_t rounded_size(size_t nbytes) {
  size_t r = std::max(nbytes, kAlignment);
  r = (r + kAlignment - 1) / kAlignment * kAlignment;
  if (r >= kCacheMinBytes) r = (r + kGranule - 1) / kGranule * kGranule;
  return r;
}

}  // namespace

void* cpu_alloc(size_t nbytes) {
  size_t size = rounded_size(nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.allocated += size;
    c.peak = std::max(c.peak, c.allocated);
    if (size >= kCacheMinBytes) {
      auto it = c.free_blocks.find(size);
      if (it != c.free_blocks.end()) {
        void* p = it->second;
        c.cached -= size;
        c.free_blocks.erase(it);
        return p;
      }
    }
  }
  void* p = std::aligned_alloc(kAlignment, size);
  if (p == nullptr) {
    // Give the cache back and try once more before reporting.
    std::lock_guard<std::mutex> lock(c.mutex);
    c.shrink_to(0);
    p = std::aligned_alloc(kAlignment, size);
    if (p == nullptr) c.allocated -= size;
  }
  OCTET_CHECK(p != nullptr, "allocate: out of memory allocating ", nbytes, " bytes on the CPU");
  return p;
}

void cpu_free(void* p, size_t nbytes) {
  if (p == nullptr) return;
  size_t size = rounded_size(nbytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.allocated -= size;
  if (size >= kCacheMinBytes && size <= c.limit) {
    c.free_blocks.emplace(size, p);
    c.cached += size;
    c.shrink_to(c.limit);
    return;
  }
  std::free(p);
}

void set_cpu_cache_limit(size_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.limit = bytes;
  c.shrink_to(bytes);
}

void release_cpu_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.shrink_to(0);
}

CpuMemoryStats cpu_memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return {c.allocated, c.peak, c.cached};
}

void reset_cpu_peak() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.peak = c.allocated;
}

}  // namespace octet
