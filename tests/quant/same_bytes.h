// Byte-for-byte comparison of n elements of elem bytes each, naming the first that differs: how the
// host emulations of the CUDA kernels check their outputs against the CPU's.
//   EXPECT_TRUE(testing::same_bytes(got.data(), want.data(), n, sizeof(float), "y"));
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace octet::testing {

inline ::testing::AssertionResult same_bytes(const void* got, const void* want, int64_t n, int64_t elem,
                                             const std::string& what) {
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(static_cast<const char*>(got) + i * elem, static_cast<const char*>(want) + i * elem,
                    static_cast<size_t>(elem)) != 0)
      return ::testing::AssertionFailure() << what << ": element " << i << " of " << n << " differs";
  return ::testing::AssertionSuccess();
}

}  // namespace octet::testing
