// The f32 row logsumexp of softmax, log_softmax, logsumexp and cross_entropy (core/cpu/reduce.cpp):
// exps in float by a polynomial, summed in double. Every ISA path gives the same bits; the result
// is within float rounding of the f64 computation on the same values; -inf, +inf and NaN rows keep
// their meaning.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"

namespace octet {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Rows of length r: normal logits of scale 4, with a few hard rows when r allows.
Tensor logits(int64_t rows, int64_t r, uint64_t seed) {
  Generator g(seed);
  Tensor x = randn({rows, r}, DType::f32, &g) * 4.0;
  float* p = x.data<float>();
  if (rows >= 4 && r >= 3) {
    p[0 * r + 1] = -kInf;                                  // one -inf
    for (int64_t j = 0; j < r; ++j) p[1 * r + j] = -kInf;  // all -inf
    p[2 * r + 2] = -200.0f;                                // far below the max
    p[3 * r + 0] = 90.0f;                                  // exp of the others underflows
  }
  return x;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)) == 0;
}

TEST(LogSumExpF32, EveryIsaGivesTheSameBits) {
  const cpu::Isa best = cpu::active_isa();
  for (int64_t r : {1, 2, 7, 8, 9, 31, 257, 31001}) {
    Tensor x = logits(5, r, 10 + r);
    cpu::set_active_isa(cpu::Isa::portable);
    const Tensor ref_lsm = log_softmax(x, 1), ref_lse = logsumexp(x, {1});
    for (cpu::Isa isa : {cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (!cpu::isa_supported(isa)) continue;
      cpu::set_active_isa(isa);
      EXPECT_TRUE(same_bits(log_softmax(x, 1), ref_lsm)) << cpu::isa_name(isa) << " r " << r;
      EXPECT_TRUE(same_bits(logsumexp(x, {1}), ref_lse)) << cpu::isa_name(isa) << " r " << r;
    }
    cpu::set_active_isa(best);
  }
}

TEST(LogSumExpF32, WithinFloatRoundingOfF64) {
  for (int64_t r : {3, 8, 100, 31001}) {
    Tensor x = logits(6, r, 20 + r);
    const std::vector<float> lse = logsumexp(x, {1}).to_vector<float>();
    const std::vector<double> want = logsumexp(x.to(DType::f64), {1}).to_vector<double>();
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(want[i])) {
        EXPECT_EQ(static_cast<double>(lse[i]), want[i]) << i;
        continue;
      }
      EXPECT_NEAR(lse[i], want[i], 2e-7 * std::max(1.0, std::fabs(want[i]))) << "r " << r << " row " << i;
    }
    const std::vector<float> lsm = log_softmax(x, 1).to_vector<float>();
    const std::vector<double> lsm64 = log_softmax(x.to(DType::f64), 1).to_vector<double>();
    for (size_t i = 0; i < lsm.size(); ++i) {
      if (std::isinf(lsm64[i]) || std::isnan(lsm64[i])) continue;
      ASSERT_NEAR(lsm[i], lsm64[i], 4e-7 * std::max(1.0, std::fabs(lsm64[i]))) << "r " << r << " i " << i;
    }
  }
}

TEST(LogSumExpF32, NonFiniteRows) {
  Tensor x = from_vector<float>({1, 2, std::numeric_limits<float>::quiet_NaN(), 0, kInf, 1, -kInf, -kInf, -kInf}, {3, 3});
  const std::vector<float> lse = logsumexp(x, {1}).to_vector<float>();
  EXPECT_TRUE(std::isnan(lse[0]));
  EXPECT_EQ(lse[1], kInf);
  EXPECT_EQ(lse[2], -kInf);
  // Cross-entropy over the vocabulary of a word LM: the same as in f64 to float rounding.
  Tensor big = logits(4, 31000, 7);
  Tensor target = from_vector<int64_t>({5, 30999, 0, 1234}, {4});
  Tensor big_ok = big.narrow(0, 2, 2).contiguous();  // rows without -inf
  Tensor t_ok = target.narrow(0, 2, 2).contiguous();
  EXPECT_NEAR(cross_entropy(big_ok, t_ok).item(), cross_entropy(big_ok.to(DType::f64), t_ok).item(), 1e-5);
}

}  // namespace
}  // namespace octet
