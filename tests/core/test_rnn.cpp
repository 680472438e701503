// lstm_layer (core/ops/rnn.h): the fused path (one input GEMM, per step one GEMM and one fused gate
// kernel, and the same in the backward) against the plain path built from lstm_cell, on random data
// of odd sizes, in f32 and f64, outputs and every gradient; finite differences in f64; the kernels'
// argument checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/kernels.h"
#include "core/octet.h"
#include "tests/core/gradcheck.h"

namespace octet {
namespace {

using testing::gradcheck;
using testing::rand_input;

struct Case {
  int64_t t, b, i, h;
  bool bias, state;
};

// Inputs x, h0, c0, w_ih, w_hh, b_ih, b_hh (state and biases undefined when the case has none).
std::vector<Tensor> inputs_for(const Case& c, DType dtype, uint64_t seed) {
  auto in = [&](const Shape& s, uint64_t k) { return rand_input(s, seed + k).detach().to(dtype).requires_grad_(true); };
  return {in({c.t, c.b, c.i}, 0),
          c.state ? in({c.b, c.h}, 1) : Tensor(),
          c.state ? in({c.b, c.h}, 2) : Tensor(),
          in({4 * c.h, c.i}, 3),
          in({4 * c.h, c.h}, 4),
          c.bias ? in({4 * c.h}, 5) : Tensor(),
          c.bias ? in({4 * c.h}, 6) : Tensor()};
}

using LayerFn = std::pair<Tensor, LstmState> (*)(const Tensor&, const LstmState&, const Tensor&, const Tensor&,
                                                 const Tensor&, const Tensor&);

Tensor run(LayerFn f, const std::vector<Tensor>& v) {
  auto [y, s] = f(v[0], LstmState{v[1], v[2]}, v[3], v[4], v[5], v[6]);
  return cat({y.reshape({-1}), s.h.reshape({-1}), s.c.reshape({-1})}, 0);
}

TEST(LstmLayer, FusedEqualsPlainPath) {
  // Tolerances: f64 differs only by summation order (GEMM blocking vs per-step products): ~1e-15
  // relative; f32 through 9 steps of recurrence with K <= 70-term sums: a few 1e-6 of values <= 1.
  const double tol_f64 = 1e-12, tol_f32 = 2e-5;
  const std::vector<Case> cases = {{1, 1, 1, 1, true, false},
                                   {5, 3, 7, 13, true, true},
                                   {9, 2, 33, 17, false, true},
                                   {3, 4, 5, 65, true, false},
                                   {2, 1, 70, 3, false, false}};
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? tol_f64 : tol_f32;
    for (const Case& c : cases) {
      const std::string what = ::testing::PrintToString(std::vector<int64_t>{c.t, c.b, c.i, c.h}) + " " +
                               std::string(dtype_name(dtype)) + (c.bias ? " bias" : "") + (c.state ? " state" : "");
      std::vector<Tensor> a = inputs_for(c, dtype, 100), b = inputs_for(c, dtype, 100);
      Tensor fused = run(lstm_layer, a), plain = run(lstm_layer_reference, b);
      std::vector<double> fv = fused.to(DType::f64).to_vector<double>(), pv = plain.to(DType::f64).to_vector<double>();
      ASSERT_EQ(fv.size(), pv.size()) << what;
      for (size_t k = 0; k < fv.size(); ++k) ASSERT_NEAR(fv[k], pv[k], tol) << what << " output " << k;
      Tensor r = rand_input(fused.shape(), 7).detach().to(dtype);
      sum(fused * r).backward();
      sum(plain * r).backward();
      for (size_t n = 0; n < a.size(); ++n) {
        if (!a[n].defined()) continue;
        ASSERT_TRUE(a[n].grad().defined()) << what << " input " << n;
        std::vector<double> ga = a[n].grad().to(DType::f64).to_vector<double>(),
                            gb = b[n].grad().to(DType::f64).to_vector<double>();
        for (size_t k = 0; k < ga.size(); ++k)
          ASSERT_NEAR(ga[k], gb[k], 4 * tol) << what << " d(input " << n << ") " << k;
      }
    }
  }
}

TEST(LstmLayer, Gradcheck) {
  for (const Case& c : {Case{3, 2, 3, 4, true, true}, Case{2, 1, 2, 3, false, false}}) {
    std::vector<Tensor> v = inputs_for(c, DType::f64, 200);
    gradcheck([](const std::vector<Tensor>& in) { return run(lstm_layer, in); }, v);
  }
}

TEST(LstmLayer, OnlyTheFinalStateUsed) {
  // No gradient reaches y: the backward starts from dh_T, dc_T alone (zeros for y).
  std::vector<Tensor> v = inputs_for({4, 2, 3, 5, true, true}, DType::f64, 300);
  gradcheck(
      [](const std::vector<Tensor>& in) {
        auto [y, s] = lstm_layer(in[0], LstmState{in[1], in[2]}, in[3], in[4], in[5], in[6]);
        return s.c * 2.0 + s.h;
      },
      v);
}

TEST(LstmLayer, RejectsBadArguments) {
  Tensor x = randn({3, 2, 4}), wih = randn({20, 4}), whh = randn({20, 5}), b = randn({20});
  EXPECT_NO_THROW(lstm_layer(x, {}, wih, whh, b, b));
  EXPECT_THROW(lstm_layer(randn({2, 4}), {}, wih, whh), Error);
  EXPECT_THROW(lstm_layer(randn({0, 2, 4}), {}, wih, whh), Error);
  EXPECT_THROW(lstm_layer(x, {}, randn({20, 3}), whh), Error);
  EXPECT_THROW(lstm_layer(x, {}, wih, randn({20, 4})), Error);
  EXPECT_THROW(lstm_layer(x, {}, wih, whh, b, Tensor()), Error);
  EXPECT_THROW(lstm_layer(x, {}, wih, whh, randn({5}), randn({5})), Error);
  EXPECT_THROW(lstm_layer(x, {zeros({2, 5}), Tensor()}, wih, whh), Error);
  EXPECT_THROW(lstm_layer(x, {zeros({3, 5}), zeros({3, 5})}, wih, whh), Error);
  EXPECT_THROW(lstm_layer(x, {}, wih.to(DType::f64), whh), Error);
  EXPECT_THROW(lstm_layer(x.to(DType::i64), {}, wih, whh), Error);
  // The kernels check their operands too.
  Tensor gates = randn({2, 20}), c = zeros({2, 5});
  EXPECT_NO_THROW(kernels::lstm_gates_forward(gates, b, c, zeros({2, 5}), zeros({2, 5})));
  EXPECT_THROW(kernels::lstm_gates_forward(randn({2, 18}), Tensor(), c, c, c), Error);
  EXPECT_THROW(kernels::lstm_gates_forward(gates, randn({5}), c, zeros({2, 5}), zeros({2, 5})), Error);
  EXPECT_THROW(kernels::lstm_gates_forward(gates, Tensor(), zeros({2, 4}), zeros({2, 5}), zeros({2, 5})), Error);
  EXPECT_THROW(kernels::lstm_gates_forward(gates.t().contiguous().t(), Tensor(), c, c, c), Error);
  EXPECT_THROW(kernels::lstm_gates_backward(gates, c, c, Tensor(), Tensor(), Tensor(), zeros({2, 20}),
                                            zeros({2, 5}, DType::f64)),
               Error);
}

}  // namespace
}  // namespace octet
