// cpu::vec_exp (core/cpu/vec_exp.h), the branch-free exp the attention softmax vectorizes: within 2
// ulp of the correctly rounded exp (libm's in double, rounded to float) on a dense sweep of the
// normal range and on random values, its special values, and the same bits on every ISA path.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/vec_exp.h"
#include "core/generator.h"
#include "tests/isa_scope.h"

namespace octet::cpu {
namespace {

// Distance in representable floats between two finite positive floats.
int64_t ulps(float a, float b) {
  return std::abs(static_cast<int64_t>(std::bit_cast<int32_t>(a)) - static_cast<int64_t>(std::bit_cast<int32_t>(b)));
}

// The largest error allowed: 2 ulp (the Taylor remainder and the range reduction's rounding).
constexpr int64_t kMaxUlps = 2;

TEST(VecExp, WithinTwoUlpOverTheNormalRange) {
  std::vector<float> xs;
  for (float x = -87.3f; x <= 88.7f; x += 0.0037f) xs.push_back(x);
  Generator g(1);
  for (int i = 0; i < 20000; ++i) {
    const double u = uniform_double(philox_at(g.seed(), g.advance(1), 0)[0], 0);
    xs.push_back(static_cast<float>(-87.0 + 175.0 * u));
    xs.push_back(static_cast<float>(-1.0 + 2.0 * u));  // where the softmax's arguments mostly are
  }
  int64_t worst = 0;
  float at = 0;
  for (float x : xs) {
    const auto want = static_cast<float>(std::exp(static_cast<double>(x)));
    const int64_t e = ulps(vec_exp(x), want);
    if (e > worst) worst = e, at = x;
  }
  EXPECT_LE(worst, kMaxUlps) << "at x = " << at;
}

TEST(VecExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(vec_exp(0.0f), 1.0f);
  EXPECT_EQ(vec_exp(-0.0f), 1.0f);
  EXPECT_EQ(vec_exp(-inf), 0.0f);
  EXPECT_EQ(vec_exp(-100.0f), 0.0f);  // a subnormal result flushes to 0
  EXPECT_EQ(vec_exp(inf), inf);
  EXPECT_EQ(vec_exp(89.0f), inf);
  EXPECT_TRUE(std::isnan(vec_exp(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isfinite(vec_exp(88.72f)));
  EXPECT_GT(vec_exp(-87.3f), 0.0f);
  EXPECT_EQ(vec_exp(1.0), std::exp(1.0));  // f64: libm's
}

TEST(VecExp, EveryIsaGivesTheSameBits) {
  std::vector<float> x;
  for (int i = 0; i < 1037; ++i) x.push_back(-90.0f + 0.1741f * static_cast<float>(i));
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  octet::testing::IsaScope isa_scope;
  std::vector<float> want;
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    set_active_isa(isa);
    std::vector<float> y(x.size());
    const float* px = x.data();
    float* py = y.data();
    const auto n = static_cast<int64_t>(x.size());
    simd_dispatch([=] {
      for (int64_t i = 0; i < n; ++i) py[i] = vec_exp(px[i]);
    });
    if (want.empty()) want = y;
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want[i])) << isa_name(isa) << " x=" << x[i];
  }
}

}  // namespace
}  // namespace octet::cpu
