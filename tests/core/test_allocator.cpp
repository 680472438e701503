// The CPU allocator: alignment, statistics, reuse of large blocks, cache limit and release.
#include <gtest/gtest.h>

#include "core/octet.h"

namespace octet {
namespace {

TEST(Allocator, AlignedAndCounted) {
  CpuMemoryStats before = cpu_memory_stats();
  {
    Tensor small = empty({3}, DType::u8);
    Tensor big = empty({1 << 20}, DType::f32);  // 4 MiB
    EXPECT_EQ(reinterpret_cast<uintptr_t>(small.raw_data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(big.raw_data()) % 64, 0u);
    CpuMemoryStats during = cpu_memory_stats();
    EXPECT_GE(during.allocated, before.allocated + (size_t{4} << 20));
    EXPECT_GE(during.peak_allocated, during.allocated);
  }
  EXPECT_EQ(cpu_memory_stats().allocated, before.allocated);
}

TEST(Allocator, LargeBlocksAreReusedAndReleasable) {
  release_cpu_cache();
  void* first = nullptr;
  {
    Tensor a = empty({3 << 20}, DType::u8);
    first = a.raw_data();
  }
  EXPECT_GE(cpu_memory_stats().cached, size_t{3} << 20);
  {
    Tensor b = empty({3 << 20}, DType::u8);  // same size: the cached block comes back
    EXPECT_EQ(b.raw_data(), first);
    EXPECT_EQ(cpu_memory_stats().cached, 0u);
  }
  release_cpu_cache();
  EXPECT_EQ(cpu_memory_stats().cached, 0u);
  set_cpu_cache_limit(0);  // nothing is kept
  { Tensor c = empty({3 << 20}, DType::u8); }
  EXPECT_EQ(cpu_memory_stats().cached, 0u);
  set_cpu_cache_limit(size_t{2} << 30);
}

}  // namespace
}  // namespace octet
