// INT8 quantizers (quant/int8_tensor.h, quant/cpu/int8_quant.h): the vectorized loops against the
// element functions of quant/int8.h on every rounding boundary, ties to even, saturation, NaN and
// infinities, clip 0, stochastic-rounding unbiasedness and reproducibility (seeds, thread counts),
// the absmax, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/int8_quant.h"
#include "quant/int8_tensor.h"

namespace octet::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Restores the thread count a test changed.
struct ThreadGuard {
  int saved = get_num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

std::vector<int8_t> codes_of(const Tensor& q) { return q.to_vector<int8_t>(); }

// Values that hit every rounding case with inv = 1: each integer and half-integer in
// [-130, 130] and their float neighbours, plus special values.
std::vector<float> boundary_values() {
  std::vector<float> v;
  for (int i = -260; i <= 260; ++i) {
    const float x = 0.5f * static_cast<float>(i);
    v.push_back(x);
    v.push_back(std::nextafter(x, kInf));
    v.push_back(std::nextafter(x, -kInf));
  }
  for (float x : {0.0f, -0.0f, kInf, -kInf, kNaN, 1e30f, -1e30f, 1e-30f, 127.49999f, -127.5f}) v.push_back(x);
  return v;
}

TEST(Int8Quant, LoopsMatchElementFunctions) {
  std::vector<float> v = boundary_values();
  Generator gen(3);
  for (float x : randn({5000}, {}, &gen).to_vector<float>()) v.push_back(50.0f * x);
  const auto n = static_cast<int64_t>(v.size());
  for (float inv : {1.0f, 127.0f / 3.0f, 0.37f}) {
    std::vector<int8_t> q(v.size());
    cpu::quantize(v.data(), n, inv, Int8Rounding::nearest, 0, 0, q.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(q[i], int8_round_nearest(v[i], inv)) << v[i] << " inv " << inv;
    // Stochastic: unaligned first indices and lengths cross the batches of random words.
    for (uint64_t first : {uint64_t{0}, uint64_t{3}, uint64_t{1022}}) {
      cpu::quantize(v.data(), n, inv, Int8Rounding::stochastic, 77, first, q.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(q[i], int8_round_stochastic(v[i], inv, sr_uniform(77, first + i))) << v[i] << " at " << i;
    }
  }
}

TEST(Int8Quant, TransposedQuantizerMatchesFlatOne) {
  // [outer][inner][len] -> [inner][outer][len], stochastic index = the source index: planes of
  // 1111 elements, and planes of one element (a Linear's rows: [N, K] -> [K, N]) over several
  // quantization blocks of 2^15, with rows shorter and longer than a block.
  struct Shape3 {
    int64_t outer, inner, len;
  };
  for (const Shape3& s : {Shape3{3, 5, 1111}, Shape3{37, 1999, 1}, Shape3{3, 40000, 1}}) {
    SCOPED_TRACE(::testing::Message() << s.outer << " x " << s.inner << " x " << s.len);
    Generator gen(4);
    Tensor x = randn({s.outer, s.inner, s.len}, {}, &gen);
    const float inv = int8_inv_scale(int8_absmax(x));
    for (Int8Rounding r : {Int8Rounding::nearest, Int8Rounding::stochastic}) {
      std::vector<int8_t> t(x.numel());
      cpu::CosineSums sums;
      std::vector<double> inner_sums(s.inner);
      cpu::quantize_transposed(x.data<float>(), s.outer, s.inner, s.len, inv, r, 9, t.data(), &sums, inner_sums.data());
      std::vector<double> want_inner = sum(x.to(DType::f64), {0, 2}).to_vector<double>();
      for (int64_t i = 0; i < s.inner; ++i)
        EXPECT_NEAR(inner_sums[i], want_inner[i], 1e-9 * (1 + std::abs(want_inner[i])));
      std::vector<int8_t> flat = codes_of(int8_quantize(x, int8_absmax(x), r, 9));
      double gq = 0, gg = 0, qq = 0;
      const float* xv = x.data<float>();
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i)
          for (int64_t l = 0; l < s.len; ++l) {
            const int64_t src = (o * s.inner + i) * s.len + l;
            ASSERT_EQ(t[(i * s.outer + o) * s.len + l], flat[src]) << "o " << o << " i " << i << " l " << l;
            gq += double(xv[src]) * flat[src], gg += double(xv[src]) * xv[src], qq += double(flat[src]) * flat[src];
          }
      EXPECT_NEAR(sums.gq, gq, 1e-9 * std::abs(gq));
      EXPECT_NEAR(sums.gg, gg, 1e-9 * gg);
      EXPECT_EQ(sums.qq, qq);  // sums of integers below 2^53: exact in any order
      EXPECT_TRUE(sums.finite);
    }
  }
}

TEST(Int8Quant, RoundToNearestTiesToEven) {
  Tensor x = from_vector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 3.49f, -3.51f}, {10});
  // clip 127: inv = 1, the values are their own scaled values.
  EXPECT_EQ(codes_of(int8_quantize(x, 127.0f)), (std::vector<int8_t>{0, 2, 2, 0, -2, -2, 126, -126, 3, -4}));
}

TEST(Int8Quant, SaturationNeverGivesMinus128) {
  Tensor x = from_vector<float>({2.0f, -2.0f, 1.0f, -1.0f, 1e20f, -1e20f, 1.0000001f, -0.9999f}, {8});
  EXPECT_EQ(codes_of(int8_quantize(x, 1.0f)), (std::vector<int8_t>{127, -127, 127, -127, 127, -127, 127, -127}));
  for (uint64_t seed = 0; seed < 50; ++seed)
    for (int8_t c : codes_of(int8_quantize(x, 1.0f, Int8Rounding::stochastic, seed))) EXPECT_NE(c, -128);
}

// The largest draw, u = 1 - 2^-24: 127 + u rounds to 128.0f in float; the code must stay 127.
TEST(Int8Quant, StochasticRoundingOfSaturatedValueWithLargestDraw) {
  const float u = uniform_float(0xffffffffu);
  ASSERT_EQ(127.0f + u, 128.0f);
  EXPECT_EQ(int8_round_stochastic(1.0f, 127.0f, u), 127);
  EXPECT_EQ(int8_round_stochastic(5.0f, 127.0f, u), 127);
  // -127 + u rounds to -126.0f as well: a saturated -127 becomes -126 with probability ~2^-18,
  // the float-sum definition's only (harmless) deviation from exact floor(y + u).
  EXPECT_EQ(int8_round_stochastic(-1.0f, 127.0f, u), -126);
}

TEST(Int8Quant, NaNInfAndClipZero) {
  Tensor x = from_vector<float>({kNaN, kInf, -kInf, 0.5f, -0.0f}, {5});
  EXPECT_EQ(codes_of(int8_quantize(x, 1.0f)), (std::vector<int8_t>{0, 127, -127, 64, 0}));
  EXPECT_EQ(codes_of(int8_quantize(x, 1.0f, Int8Rounding::stochastic, 1))[0], 0);
  // clip 0 (an all-zero tensor): every code 0, dequantized 0.
  Tensor z = zeros({7});
  EXPECT_EQ(int8_absmax(z), 0.0f);
  EXPECT_EQ(codes_of(int8_quantize(z, 0.0f)), std::vector<int8_t>(7, 0));
  EXPECT_EQ(int8_dequantize(int8_quantize(z, 0.0f), 0.0f).to_vector<float>(), std::vector<float>(7, 0.0f));
}

TEST(Int8Quant, AbsmaxKeepsNonFiniteValuesVisible) {
  Generator gen(5);
  Tensor x = randn({100003}, {}, &gen);
  std::vector<float> v = x.to_vector<float>();
  float want = 0;
  for (float e : v) want = std::max(want, std::abs(e));
  EXPECT_EQ(int8_absmax(x), want);
  EXPECT_EQ(int8_absmax(Tensor(zeros({0}))), 0.0f);
  v[77777] = -kInf;
  EXPECT_EQ(int8_absmax(from_vector<float>(v, {100003})), kInf);
  v[5] = kNaN;
  EXPECT_TRUE(std::isnan(int8_absmax(from_vector<float>(v, {100003}))));
  // A NaN clip (or an infinite one) quantizes to codes 0 whose value is NaN: divergence stays visible.
  Tensor back = int8_dequantize(int8_quantize(x, kNaN), kNaN);
  EXPECT_TRUE(std::isnan(back.to_vector<float>()[0]));
  // Any strides: the transpose of a matrix has the same absmax.
  Tensor m = randn({33, 47}, {}, &gen);
  EXPECT_EQ(int8_absmax(m.t()), int8_absmax(m));
}

TEST(Int8Quant, DequantizeIsCodeTimesScale) {
  Tensor q = from_vector<int8_t>({-127, -1, 0, 1, 64, 127}, {2, 3});
  std::vector<float> got = int8_dequantize(q, 2.5f).to_vector<float>();
  const float s = int8_scale(2.5f);
  EXPECT_EQ(got, (std::vector<float>{-127 * s, -s, 0.0f, s, 64 * s, 127 * s}));
  EXPECT_EQ(int8_dequantize(q, 2.5f).shape(), (Shape{2, 3}));
}

// E[q * s] = x: per value over many draws (each element draws its own u) and overall on normal data.
TEST(Int8Quant, StochasticRoundingIsUnbiased) {
  constexpr int64_t kDraws = 40000;
  for (float x : {0.3f, -1.7f, 5.25f, 126.9f, -0.01f}) {
    Tensor t = full({kDraws}, x);
    std::vector<int8_t> q = codes_of(int8_quantize(t, 127.0f, Int8Rounding::stochastic, 11));
    double mean = 0;
    for (int8_t c : q) mean += c;
    mean /= kDraws;
    const double frac = x - std::floor(x);
    // Four standard deviations of the mean of kDraws Bernoulli(frac) draws (and a floor for frac ~ 0).
    const double tol = 4.0 * std::sqrt(frac * (1 - frac) / kDraws) + 1e-6;
    EXPECT_NEAR(mean, x, tol) << x;
  }
  Generator gen(6);
  Tensor g = randn({1 << 20}, {}, &gen);
  const float clip = int8_absmax(g);
  std::vector<float> back =
      int8_dequantize(int8_quantize(g, clip, Int8Rounding::stochastic, 12), clip).to_vector<float>();
  std::vector<float> gv = g.to_vector<float>();
  double err = 0;
  for (size_t i = 0; i < gv.size(); ++i) err += double(back[i]) - gv[i];
  err /= double(gv.size());
  // Each error lies in (-s, s) with variance <= s^2 / 4: four standard deviations of the mean.
  EXPECT_LT(std::abs(err), 4.0 * 0.5 * int8_scale(clip) / std::sqrt(double(gv.size())));
}

TEST(Int8Quant, StochasticRoundingReproducible) {
  ThreadGuard guard;
  Generator gen(7);
  Tensor g = randn({300001}, {}, &gen);
  const float clip = int8_absmax(g);
  set_num_threads(1);
  std::vector<int8_t> one = codes_of(int8_quantize(g, clip, Int8Rounding::stochastic, 42));
  set_num_threads(2);
  std::vector<int8_t> two = codes_of(int8_quantize(g, clip, Int8Rounding::stochastic, 42));
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, codes_of(int8_quantize(g, clip, Int8Rounding::stochastic, 42)));
  EXPECT_NE(one, codes_of(int8_quantize(g, clip, Int8Rounding::stochastic, 43)));
}

TEST(Int8Quant, BackwardSeedsDiffer) {
  EXPECT_EQ(int8_backward_seed(1, 0), int8_backward_seed(1, 0));
  EXPECT_NE(int8_backward_seed(1, 0), int8_backward_seed(1, 1));
  EXPECT_NE(int8_backward_seed(1, 0), int8_backward_seed(2, 0));
  EXPECT_NE(int8_backward_seed(0, 0), 0u);
}

TEST(Int8Quant, RejectsBadInput) {
  EXPECT_THROW(int8_absmax(zeros({3}, DType::f64)), Error);
  EXPECT_THROW(int8_absmax(Tensor()), Error);
  EXPECT_THROW(int8_quantize(zeros({3}), -1.0f), Error);
  EXPECT_THROW(int8_quantize(zeros({3}, DType::i32), 1.0f), Error);
  EXPECT_THROW(int8_dequantize(zeros({3}), 1.0f), Error);
  try {
    int8_quantize(zeros({3}), -1.0f);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int8_quantize"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace octet::quant
