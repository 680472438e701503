// The vectorized Philox runs (core/cpu/philox.h) against philox_at, word for word, on every ISA,
// at odd lengths and at counters whose low word wraps; the integer form of dropout's keep test
// (core/generator.h) against the float comparison it replaces; the random fills drawn through them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/philox.h"
#include "core/generator.h"
#include "core/octet.h"
#include "tests/isa_scope.h"

namespace octet {
namespace {

constexpr cpu::Isa kIsas[] = {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512};

// Restores the process's ISA when a test ends.
TEST(Philox, RunsMatchPhiloxAtOnEveryIsa) {
  octet::testing::IsaScope isa_scope;
  int tested = 0;
  for (cpu::Isa isa : kIsas) {
    if (!cpu::isa_supported(isa)) continue;
    cpu::set_active_isa(isa);
    ++tested;
    for (uint64_t seed : {uint64_t{0}, uint64_t{0x0123456789ABCDEFull}}) {
      // 2^32 - 5: the low word wraps inside the first 8 counters; the last: the counter itself wraps.
      for (uint64_t ctr : {uint64_t{0}, uint64_t{1000003}, (uint64_t{1} << 32) - 5, (uint64_t{7} << 32) - 37,
                           std::numeric_limits<uint64_t>::max() - 20}) {
        for (int64_t n : {0, 1, 7, 8, 9, 31, 32, 33, 40, 100, 257}) {
          SCOPED_TRACE(std::string(cpu::isa_name(isa)) + " seed " + std::to_string(seed) + " ctr " +
                       std::to_string(ctr) + " n " + std::to_string(n));
          std::vector<uint32_t> four(4 * n + 1, 0xDEADBEEFu), first(n + 1, 0xDEADBEEFu);
          cpu::philox_words(seed, ctr, n, four.data());
          cpu::philox_first_words(seed, ctr, n, first.data());
          for (int64_t b = 0; b < n; ++b) {
            const std::array<uint32_t, 4> want = philox_at(seed, ctr, static_cast<uint64_t>(b));
            for (int w = 0; w < 4; ++w) ASSERT_EQ(four[4 * b + w], want[w]) << "counter " << b << " word " << w;
            ASSERT_EQ(first[b], want[0]) << "counter " << b;
          }
          EXPECT_EQ(four[4 * n], 0xDEADBEEFu);  // nothing written past the end
          EXPECT_EQ(first[n], 0xDEADBEEFu);
        }
      }
    }
  }
  EXPECT_GE(tested, 1);
}

TEST(Philox, DropoutThresholdDecidesAsTheFloatComparison) {
  const double ps[] = {0.0, 1e-20, 1e-9, 0.1, 1.0 / 3.0, 0.5, 0.9, 0.999999, std::nextafter(1.0, 0.0)};
  for (double p : ps) {
    const uint32_t k = dropout_threshold(p);
    EXPECT_GE(k, 1u) << p;
    EXPECT_LE(k, 1u << 24) << p;
    std::vector<uint32_t> words;
    for (int64_t d = -3; d <= 3; ++d) {  // the draws beside the threshold, with low bits set and not
      const int64_t m = static_cast<int64_t>(k) + d;
      if (m < 0 || m >= (int64_t{1} << 24)) continue;
      for (uint32_t low : {0u, 0xFFu}) words.push_back(static_cast<uint32_t>(m) << 8 | low);
    }
    for (uint32_t w : {0u, 0xFFFFFFFFu, 0x80000000u, 0x12345678u}) words.push_back(w);
    for (uint32_t w : words) {
      const bool want = static_cast<double>(uniform_float(w)) < 1.0 - p;
      EXPECT_EQ(dropout_keeps_word(w, k), want) << "p " << p << " w " << w;
    }
  }
}

// The fills are element functions of (seed, offset + i): the same tensor on every ISA, and the
// values philox_at's words give.
TEST(Philox, RandomFillsAreTheSameOnEveryIsa) {
  octet::testing::IsaScope isa_scope;
  std::vector<std::vector<float>> u32, n32;
  std::vector<std::vector<double>> u64;
  for (cpu::Isa isa : kIsas) {
    if (!cpu::isa_supported(isa)) continue;
    cpu::set_active_isa(isa);
    Generator g(11);
    u32.push_back(rand({1000, 3}, DType::f32, &g).to_vector<float>());
    u64.push_back(rand({777}, DType::f64, &g).to_vector<double>());
    n32.push_back(randn({513}, DType::f32, &g).to_vector<float>());
  }
  for (size_t i = 1; i < u32.size(); ++i) {
    EXPECT_EQ(u32[i], u32[0]);
    EXPECT_EQ(u64[i], u64[0]);
    EXPECT_EQ(n32[i], n32[0]);
  }
  Generator g(11);
  const std::vector<float> first = rand({5}, DType::f32, &g).to_vector<float>();
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(first[i], uniform_float(philox_at(11, 0, static_cast<uint64_t>(i))[0])) << i;
}

}  // namespace
}  // namespace octet
