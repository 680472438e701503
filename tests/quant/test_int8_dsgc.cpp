// DSGC (quant/dsgc.h): the cosine distance against a plain double computation, special cases,
// the clip search against max|g| on gradients with planted outliers and against a dense grid
// search on several distributions, determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <vector>

#include "core/octet.h"
#include "quant/dsgc.h"

namespace octet::quant {
namespace {

// The brief's bound: the search's d_c within this of the dense grid's minimum.
constexpr double kGridSlack = 1e-3;
// A dense grid fine enough to be the reference minimum.
constexpr int kDenseGrid = 2000;

// 1 - cos(g, q * scale) in plain double from the element quantizer.
double plain_distance(const std::vector<float>& g, float clip) {
  const float inv = int8_inv_scale(clip);
  double gq = 0, gg = 0, qq = 0;
  for (float x : g) {
    const double q = int8_round_nearest(x, inv);
    gq += x * q, gg += double(x) * x, qq += q * q;
  }
  return 1.0 - gq / std::sqrt(gg * qq);
}

// N(0, 0.01^2) with `outliers` values of magnitude ~1 (100 standard deviations). d_c weighs the
// squared error, so clipping an outlier to c costs (|o| - c)^2 while max|g| as the clip costs the
// bulk n * (max|g| / 127)^2 / 12: with few outliers the best clip lies clearly below max|g|.
Tensor gradient_with_outliers(int64_t n, int64_t outliers, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> v = (randn({n}, {}, &gen) * 0.01).to_vector<float>();
  for (int64_t i = 0; i < outliers; ++i) v[(i * 7919) % n] = (i % 2 ? -1.0f : 1.0f) * (1.0f + 0.1f * float(i));
  return from_vector<float>(v, {n});
}

TEST(Dsgc, CosineDistanceMatchesPlainDouble) {
  Generator gen(1);
  Tensor g = randn({50001}, {}, &gen);
  std::vector<float> v = g.to_vector<float>();
  for (float clip : {0.5f, 1.7f, int8_absmax(g)}) EXPECT_NEAR(cosine_distance(g, clip), plain_distance(v, clip), 1e-12);
  // Stochastic rounding: the distance of the codes int8_quantize gives with that seed.
  const float c = int8_absmax(g);
  std::vector<int8_t> q = int8_quantize(g, c, Int8Rounding::stochastic, 5).to_vector<int8_t>();
  double gq = 0, gg = 0, qq = 0;
  for (size_t i = 0; i < v.size(); ++i) gq += v[i] * double(q[i]), gg += double(v[i]) * v[i], qq += double(q[i]) * q[i];
  EXPECT_NEAR(cosine_distance(g, c, Int8Rounding::stochastic, 5), 1.0 - gq / std::sqrt(gg * qq), 1e-12);
}

TEST(Dsgc, CosineDistanceSpecialCases) {
  EXPECT_EQ(cosine_distance(zeros({10}), 0.0f), 0.0);
  EXPECT_EQ(cosine_distance(zeros({10}), 1.0f), 0.0);
  // Values on the grid are quantized exactly.
  Tensor exact = from_vector<float>({-127 * int8_scale(2.0f), 3 * int8_scale(2.0f), 0.0f}, {3});
  EXPECT_LT(cosine_distance(exact, 2.0f), 1e-12);
  // Every code 0 but g not: orthogonal.
  EXPECT_EQ(cosine_distance(full({4}, 1e-3), 100.0f), 1.0);
  Tensor bad = from_vector<float>({1.0f, std::numeric_limits<float>::quiet_NaN()}, {2});
  EXPECT_TRUE(std::isnan(cosine_distance(bad, 1.0f)));
  EXPECT_TRUE(std::isnan(cosine_distance(full({3}, 1.0), std::numeric_limits<float>::infinity())));
  EXPECT_THROW(cosine_distance(full({3}, 1.0), -1.0f), Error);
}

TEST(Dsgc, ClipBelowMaxWinsOnPlantedOutliers) {
  Tensor g = gradient_with_outliers(100000, 2, 2);
  const float max_abs = int8_absmax(g);
  DsgcResult r = dsgc_search(g);
  const double at_max = cosine_distance(g, max_abs);
  std::cout << "[ info     ] planted outliers: max|g| " << max_abs << " d_c " << at_max << "; DSGC clip " << r.clip
            << " d_c " << r.cos_distance << "\n";
  EXPECT_LT(r.clip, 0.9f * max_abs);
  EXPECT_LT(r.cos_distance, 0.9 * at_max);
  EXPECT_DOUBLE_EQ(r.cos_distance, cosine_distance(g, r.clip));
  EXPECT_EQ(r.evaluations, DsgcOptions().grid_points + DsgcOptions().golden_iterations + 2);
}

// Against the minimum of kDenseGrid evenly spaced clips over (0, max|g|].
TEST(Dsgc, WithinSlackOfDenseGridMinimum) {
  Generator gen(3);
  const int64_t n = 20000;
  std::vector<std::pair<const char*, Tensor>> cases = {
      {"normal", randn({n}, {}, &gen)},
      {"uniform", rand({n}, {}, &gen) - 0.5},
      {"cubed normal (heavy tails)", pow(randn({n}, {}, &gen), 3.0)},
      {"normal + outliers", gradient_with_outliers(n, 4, 4)},
      {"sparse", randn({n}, {}, &gen) * gt(rand({n}, {}, &gen), 0.95).to(DType::f32)},
  };
  for (auto& [name, g] : cases) {
    const float max_abs = int8_absmax(g);
    double dense = std::numeric_limits<double>::infinity();
    for (int j = 1; j <= kDenseGrid; ++j) dense = std::min(dense, cosine_distance(g, max_abs * float(j) / kDenseGrid));
    DsgcResult r = dsgc_search(g);
    EXPECT_LE(r.cos_distance, dense + kGridSlack) << name;
    EXPECT_GT(r.clip, 0.0f) << name;
    EXPECT_LE(r.clip, max_abs) << name;
  }
}

TEST(Dsgc, SpecialGradients) {
  DsgcResult z = dsgc_search(zeros({100}));
  EXPECT_EQ(z.clip, 0.0f);
  EXPECT_EQ(z.cos_distance, 0.0);
  Tensor bad = from_vector<float>({1.0f, std::numeric_limits<float>::infinity()}, {2});
  DsgcResult b = dsgc_search(bad);
  EXPECT_TRUE(std::isinf(b.clip));
  EXPECT_TRUE(std::isnan(b.cos_distance));
  EXPECT_THROW(dsgc_search(zeros({3}), DsgcOptions{0, 3}), Error);
  EXPECT_THROW(dsgc_search(zeros({3}, DType::f64)), Error);
}

TEST(Dsgc, DeterministicAcrossThreadCounts) {
  const int saved = get_num_threads();
  Tensor g = gradient_with_outliers(200003, 20, 5);
  set_num_threads(1);
  DsgcResult one = dsgc_search(g);
  set_num_threads(2);
  DsgcResult two = dsgc_search(g);
  set_num_threads(saved);
  EXPECT_EQ(one.clip, two.clip);
  EXPECT_EQ(one.cos_distance, two.cos_distance);
}

}  // namespace
}  // namespace octet::quant
