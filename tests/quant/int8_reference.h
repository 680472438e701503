// What the INT8 op tests (test_int8_conv.cpp, test_int8_linear.cpp) compare with: random operands,
// the dequantized values the ops compute with (in f64), and the bounds of their float roundings.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/int8_tensor.h"

namespace octet::quant::testing {

// The ops compute fl(fl(float(acc) * fl(sa * sb)) + bias) from an exact int32 sum: at most four
// float roundings (2^-24 relative each) of quantities bounded by sum|terms| + |bias|; the f64
// reference multiplies dequantized operands, each already rounded once to float (two more).
// Compared against sum|terms| (computed by the same product on absolute values): 8 * 2^-24.
inline constexpr double kRoundings = 8.0 * 0x1p-24;

inline Tensor random(const Shape& shape, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return randn(shape, {}, &g) * scale;
}

// The values the op computes with: dequant(quant(t)) in f64.
inline Tensor dequantized64(const Tensor& t, float clip, Int8Rounding r = Int8Rounding::nearest, uint64_t seed = 0) {
  return int8_dequantize(int8_quantize(t, clip, r, seed), clip).to(DType::f64);
}

// |got - want| <= kRoundings * bound, elementwise.
inline void expect_within(const Tensor& got, const Tensor& want, const Tensor& bound, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>(), b = bound.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_LE(std::abs(g[i] - w[i]), kRoundings * b[i] + 1e-30)
        << what << " element " << i << ": " << g[i] << " vs " << w[i] << " (bound " << b[i] << ")";
}

// A bias gradient db against the sum of dy over `dims` in f64: a float sum of n terms is within n
// roundings of sum|dy|, whatever the order.
inline void expect_bias_grad(const Tensor& db, const Tensor& dy, const std::vector<int64_t>& dims,
                             const std::string& what) {
  const Tensor d = dy.to(DType::f64);
  std::vector<double> got = db.to_vector<double>(), want = sum(d, dims).to_vector<double>(),
                      bound = sum(abs(d), dims).to_vector<double>();
  const double terms = double(dy.numel()) / double(db.numel());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], terms * 0x1p-24 * bound[i]) << what << " db";
}

}  // namespace octet::quant::testing
