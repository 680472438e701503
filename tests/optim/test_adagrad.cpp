// Adagrad: hand-computed first steps, trajectories against a scalar reference of torch.optim.Adagrad
// (f64), 8-bit state against 32-bit, options and state names.
#include <gtest/gtest.h>

#include <cmath>

#include "core/octet.h"
#include "optim/adagrad.h"
#include "optim_test_util.h"

namespace octet {
namespace {

using namespace octet::testing;

const Vec kInit = {0.5, -1.25, 2.0, 0.75, -0.1, 3.0};
const Shape kShape = {2, 3};

// torch.optim.Adagrad, written straight from the formulas in optim/adagrad.h.
struct AdagradRef {
  double lr, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0, eps = 1e-10;
  Vec sum{};
  int t = 0;
  void step(Vec& p, const Vec& g_in) {
    if (sum.empty()) sum.assign(p.size(), initial_accumulator_value);
    ++t;
    const double clr = lr / (1 + (t - 1) * lr_decay);
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = g_in[i] + weight_decay * p[i];
      sum[i] += g * g;
      p[i] -= clr * g / (std::sqrt(sum[i]) + eps);
    }
  }
};

TEST(OptimAdagrad, FirstStepsByHand) {
  // p = 1, g = 2, eps 0: sum1 = 4, p1 = 1 - 0.1 * 2 / 2 = 0.9; sum2 = 8, p2 = 0.9 - 0.1 * 2 / sqrt(8).
  Tensor p = param_of({1.0}, {1});
  Adagrad opt(NamedTensors{{"p", p}}, AdagradOptions(0.1).eps(0));
  p.set_grad(full({1}, 2.0, DType::f64));
  opt.step();
  EXPECT_NEAR(p.item(), 0.9, 1e-15);
  opt.step();
  EXPECT_NEAR(p.item(), 0.9 - 0.2 / std::sqrt(8.0), 1e-15);
  // initial_accumulator_value 5 and lr_decay 1: sum1 = 9, p1 = 1 - 0.1 * 2 / 3; clr2 = 0.05.
  Tensor q = param_of({1.0}, {1});
  Adagrad decayed(NamedTensors{{"q", q}}, AdagradOptions(0.1).eps(0).initial_accumulator_value(5).lr_decay(1));
  q.set_grad(full({1}, 2.0, DType::f64));
  decayed.step();
  EXPECT_NEAR(q.item(), 1.0 - 0.2 / 3.0, 1e-15);
  decayed.step();
  EXPECT_NEAR(q.item(), 1.0 - 0.2 / 3.0 - 0.05 * 2.0 / std::sqrt(13.0), 1e-15);
}

TEST(OptimAdagrad, Trajectories) {
  auto check = [](const AdagradOptions& o, const AdagradRef& ref) {
    expect_trajectory<Adagrad>(kInit, kShape, o, ref, 6);
  };
  check(AdagradOptions(0.01), AdagradRef{.lr = 0.01});
  check(AdagradOptions(0.1).lr_decay(0.3), AdagradRef{.lr = 0.1, .lr_decay = 0.3});
  check(AdagradOptions(0.05).weight_decay(0.2), AdagradRef{.lr = 0.05, .weight_decay = 0.2});
  check(AdagradOptions(0.05).initial_accumulator_value(0.5).eps(1e-3),
        AdagradRef{.lr = 0.05, .initial_accumulator_value = 0.5, .eps = 1e-3});
}

// 8-bit state (the unsigned map: the sum is non-negative) tracks 32-bit state.
TEST(OptimAdagrad, EightBitStateTracks32Bit) {
  Generator g(9);
  Tensor a = randn({64, 100}, DType::f32, &g), b = a.clone();
  a.requires_grad_(), b.requires_grad_();
  Adagrad full32(NamedTensors{{"w", a}}, AdagradOptions(0.01));
  Adagrad eight(NamedTensors{{"w", b}}, AdagradOptions(0.01), StateOptions().state_bits(8).min_8bit_size(0));
  ASSERT_EQ(eight.num_8bit_params(), 1);
  for (int s = 0; s < 30; ++s) {
    Tensor grad = randn({64, 100}, DType::f32, &g) * 0.1;
    a.set_grad(grad);
    b.set_grad(grad.clone());
    full32.step();
    eight.step();
  }
  const double diff = max(abs(a - b)).item(), scale = 30 * 0.01;
  EXPECT_LT(diff, 0.02 * scale) << "8-bit Adagrad drifted from 32-bit";
  EXPECT_GT(diff, 0.0);  // the state really is quantized
}

TEST(OptimAdagrad, StateAndBadOptions) {
  Tensor p = param_of(kInit, kShape);
  Adagrad opt(NamedTensors{{"w", p}}, AdagradOptions());
  std::vector<std::string> keys;
  for (auto& [k, t] : opt.state_dict()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"w.step", "w.sum", "steps"}));
  EXPECT_THROW(Adagrad(NamedTensors{{"w", p}}, AdagradOptions(-0.1)), Error);
  EXPECT_THROW(Adagrad(NamedTensors{{"w", p}}, AdagradOptions().lr_decay(-1)), Error);
  EXPECT_THROW(Adagrad(NamedTensors{{"w", p}}, AdagradOptions().weight_decay(-1)), Error);
  EXPECT_THROW(Adagrad(NamedTensors{{"w", p}}, AdagradOptions().initial_accumulator_value(-1)), Error);
  EXPECT_THROW(Adagrad(NamedTensors{{"w", p}}, AdagradOptions().eps(-1)), Error);
}

}  // namespace
}  // namespace octet
