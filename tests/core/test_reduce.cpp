// Reductions: values, gradients over several dim sets, keepdim, bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "core/octet.h"
#include "gradcheck.h"

namespace octet {
namespace {

using testing::gradcheck;
using testing::rand_input;

TEST(Reduce, Values) {
  Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_DOUBLE_EQ(sum(x).item(), 21);
  EXPECT_EQ(sum(x, {0}).to_vector<double>(), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(sum(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(mean(x, {-1}).to_vector<double>(), (std::vector<double>{2, 5}));
  EXPECT_EQ(var(x, {1}).to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_NEAR(var(x, {}, 0).item(), 35.0 / 12.0, 1e-12);
  EXPECT_DOUBLE_EQ(norm(x).item(), std::sqrt(91.0));
  EXPECT_DOUBLE_EQ(norm(x, 1.0).item(), 21.0);
  EXPECT_DOUBLE_EQ(norm(x, INFINITY).item(), 6.0);
  EXPECT_NEAR(norm(x, 3.0).item(), std::cbrt(441.0), 1e-12);
  EXPECT_NEAR(logsumexp(x, {1}).to_vector<double>()[0], std::log(std::exp(1) + std::exp(2) + std::exp(3)), 1e-12);
  EXPECT_DOUBLE_EQ(max(x).item(), 6);
  EXPECT_DOUBLE_EQ(min(x).item(), 1);
  EXPECT_EQ(argmax(x, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(argmin(x, 1, true).shape(), (Shape{2, 1}));
  auto [v, i] = max(from_vector<float>({1, 5, 5, 0}, {4}), 0);
  EXPECT_EQ(i.item<int64_t>(), 1);  // first of ties
  EXPECT_EQ(sum(from_vector<int32_t>({1, 2, 3}, {3})).item<int32_t>(), 6);
  // logsumexp is stable where exp would overflow
  EXPECT_NEAR(logsumexp(from_vector<float>({1000, 1000}, {2}), {0}).item(), 1000 + std::log(2.0), 1e-3);
  // f32 sums accumulate in f64: 1e7 ones plus small values keep their precision
  EXPECT_EQ(sum(ones({10000001})).item<float>(), 10000001.0f);
}

TEST(Reduce, Gradients) {
  Tensor x = rand_input({3, 4, 5}, 31);
  std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {0, 2}, {-1, 0}};
  for (const auto& dims : dim_sets) {
    for (bool keep : {false, true}) {
      SCOPED_TRACE(::testing::PrintToString(dims) + (keep ? " keepdim" : ""));
      gradcheck([&](const auto& v) { return sum(v[0], dims, keep); }, {x});
      gradcheck([&](const auto& v) { return mean(v[0], dims, keep); }, {x});
      gradcheck([&](const auto& v) { return var(v[0], dims, 1, keep); }, {x});
      gradcheck([&](const auto& v) { return norm(v[0], 2.0, dims, keep); }, {x});
      gradcheck([&](const auto& v) { return norm(v[0], 3.0, dims, keep); }, {x});
      if (!dims.empty()) gradcheck([&](const auto& v) { return logsumexp(v[0], dims, keep); }, {x});
    }
  }
  for (int64_t d : {0, 1, 2}) {
    gradcheck([&](const auto& v) { return max(v[0], d).values; }, {x});
    gradcheck([&](const auto& v) { return min(v[0], d, true).values; }, {x});
  }
  gradcheck([](const auto& v) { return max(v[0]); }, {x});
  gradcheck([](const auto& v) { return norm(v[0], INFINITY, {1}); }, {x});
  gradcheck([](const auto& v) { return sum(v[0].permute({2, 0, 1}), {1}); }, {x});  // non-contiguous
  // The 2-norm of zeros has gradient zero, not NaN.
  Tensor z = zeros({3}, testing::f64_grad());
  norm(z).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

// Sums over leading dims (a bias gradient's sum over the batch; a conv bias's over N, H, W) run
// without the permuted copy (kernels::reduce_outer): the same sums in the same order as the rows
// of that copy, so the bits equal the reduction of the explicitly permuted tensor, for every dtype
// the sum takes; norm's sum of squares too; odd sizes, with keepdim.
TEST(Reduce, OverLeadingDimsEqualsThePermutedRowsBitForBit) {
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
    std::vector<int64_t> perm;  // kept dims first
  };
  const std::vector<Case> cases = {
      {{4099, 37}, {0}, {1, 0}},
      {{300, 513}, {0}, {1, 0}},
      {{5, 7, 11, 3}, {0, 2, 3}, {1, 0, 2, 3}},
      {{3, 2, 5, 4}, {0, 1}, {2, 3, 0, 1}},
      {{6, 4, 5, 7}, {0, 3}, {1, 2, 0, 3}},
      {{2, 1, 1}, {0}, {1, 2, 0}},
  };
  for (DType t : {DType::f32, DType::f64, DType::i64, DType::i32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dtype_name(t) << " case " << (&c - cases.data()));
      Tensor x = (randn(c.shape) * 1000.0).to(t);
      const Tensor rows = x.permute(c.perm).contiguous();
      const int64_t kept = static_cast<int64_t>(c.perm.size() - c.dims.size());
      std::vector<int64_t> trailing;
      for (int64_t d = kept; d < static_cast<int64_t>(c.perm.size()); ++d) trailing.push_back(d);
      for (bool keepdim : {false, true}) {
        const Tensor got = sum(x, c.dims, keepdim), want = sum(rows, trailing, false);
        EXPECT_EQ(got.dtype(), t);
        EXPECT_EQ(got.numel(), want.numel());
        EXPECT_EQ(max(abs(got.reshape({-1}).to(DType::f64) - want.reshape({-1}).to(DType::f64))).item<double>(), 0.0);
        EXPECT_EQ(got.dim(), keepdim ? x.dim() : x.dim() - static_cast<int64_t>(c.dims.size()));
      }
      if (t == DType::f32 || t == DType::f64) {
        const Tensor got = norm(x, 2.0, c.dims), want = norm(rows, 2.0, trailing);
        EXPECT_EQ(max(abs(got.reshape({-1}) - want.reshape({-1}))).item<double>(), 0.0);
      }
    }
  }
  // The gradient is unchanged: ones in x's shape, scaled by the incoming gradient.
  Tensor x = randn({9, 5, 3}).requires_grad_(true);
  Tensor w = randn({5});
  sum(sum(x, {0, 2}) * w).backward();
  EXPECT_EQ(max(abs(x.grad() - w.reshape({1, 5, 1}).expand({9, 5, 3}))).item<double>(), 0.0);
}

TEST(Reduce, BadInput) {
  Tensor x = zeros({2, 3});
  EXPECT_THROW(sum(x, {2}), Error);
  EXPECT_THROW(sum(x, {0, 0}), Error);
  EXPECT_THROW(max(zeros({0}), 0), Error);
  EXPECT_THROW(var(zeros({1}), {0}), Error);
  EXPECT_THROW(mean(zeros({2}, DType::i32)), Error);
  EXPECT_THROW(norm(x, -1.0), Error);
}

}  // namespace
}  // namespace octet
