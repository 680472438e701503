// RMSprop and Lion: hand-computed first steps, trajectories against scalar references, options.
#include <gtest/gtest.h>

#include <cmath>

#include "core/octet.h"
#include "optim/lion.h"
#include "optim/rmsprop.h"
#include "optim_test_util.h"

namespace octet {
namespace {

using namespace octet::testing;

const Vec kInit = {0.5, -1.25, 2.0, 0.75, -0.1, 3.0};
const Shape kShape = {2, 3};
constexpr int kSteps = 5;

// torch.optim.RMSprop, written straight from the formulas in optim/rmsprop.h.
struct RmspropRef {
  double lr, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0;
  bool centered = false;
  Vec v{}, buf{}, g_avg{};
  void step(Vec& p, const Vec& g_in) {
    v.resize(p.size()), buf.resize(p.size()), g_avg.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double g = g_in[i] + weight_decay * p[i];
      v[i] = alpha * v[i] + (1 - alpha) * g * g;
      double denom = std::sqrt(v[i]) + eps;
      if (centered) {
        g_avg[i] = alpha * g_avg[i] + (1 - alpha) * g;
        denom = std::sqrt(v[i] - g_avg[i] * g_avg[i]) + eps;
      }
      if (momentum > 0) {
        buf[i] = momentum * buf[i] + g / denom;
        p[i] -= lr * buf[i];
      } else {
        p[i] -= lr * g / denom;
      }
    }
  }
};

// lion-pytorch, written straight from the formulas in optim/lion.h.
struct LionRef {
  double lr, beta1 = 0.9, beta2 = 0.99, weight_decay = 0;
  Vec m{};
  void step(Vec& p, const Vec& g) {
    m.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * weight_decay;
      double c = beta1 * m[i] + (1 - beta1) * g[i];
      p[i] -= lr * (c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0);
      m[i] = beta2 * m[i] + (1 - beta2) * g[i];
    }
  }
};

// ---- RMSprop

TEST(OptimRMSprop, FirstStepsByHand) {
  // p = 1, g = 2, eps 0: v1 = 0.01 * 4 = 0.04, p1 = 1 - 0.01 * 2 / 0.2 = 0.9.
  Tensor p = param_of({1.0}, {1});
  RMSprop opt(NamedTensors{{"p", p}}, RMSpropOptions(0.01).eps(0).momentum(0.5));
  p.set_grad(full({1}, 2.0, DType::f64));
  opt.step();
  EXPECT_NEAR(p.item(), 0.9, 1e-15);
  // v2 = 0.99 * 0.04 + 0.04 = 0.0796; buf2 = 0.5 * 10 + 2 / sqrt(0.0796).
  opt.step();
  EXPECT_NEAR(p.item(), 0.9 - 0.01 * (5.0 + 2.0 / std::sqrt(0.0796)), 1e-15);

  // Centered: g_avg1 = 0.02, so denom = sqrt(0.04 - 0.0004).
  Tensor q = param_of({1.0}, {1});
  RMSprop centered(NamedTensors{{"q", q}}, RMSpropOptions(0.01).eps(0).centered(true));
  q.set_grad(full({1}, 2.0, DType::f64));
  centered.step();
  EXPECT_NEAR(q.item(), 1.0 - 0.01 * 2.0 / std::sqrt(0.0396), 1e-15);
}

TEST(OptimRMSprop, Trajectories) {
  auto check = [](const RMSpropOptions& o, const RmspropRef& ref) {
    expect_trajectory<RMSprop>(kInit, kShape, o, ref, kSteps);
  };
  check(RMSpropOptions(0.01), RmspropRef{.lr = 0.01});
  check(RMSpropOptions(0.02).alpha(0.9).eps(1e-6), RmspropRef{.lr = 0.02, .alpha = 0.9, .eps = 1e-6});
  check(RMSpropOptions(0.01).weight_decay(0.1), RmspropRef{.lr = 0.01, .weight_decay = 0.1});
  check(RMSpropOptions(0.01).momentum(0.9), RmspropRef{.lr = 0.01, .momentum = 0.9});
  check(RMSpropOptions(0.01).centered(true), RmspropRef{.lr = 0.01, .centered = true});
  check(RMSpropOptions(0.03).alpha(0.8).momentum(0.7).centered(true).weight_decay(0.05),
        RmspropRef{.lr = 0.03, .alpha = 0.8, .weight_decay = 0.05, .momentum = 0.7, .centered = true});
}

TEST(OptimRMSprop, StateBuffers) {
  auto keys = [](const RMSpropOptions& o) {
    RMSprop opt(NamedTensors{{"w", param_of(kInit, kShape)}}, o);
    std::vector<std::string> out;
    for (auto& [k, t] : opt.state_dict()) out.push_back(k);
    return out;
  };
  using Keys = std::vector<std::string>;
  EXPECT_EQ(keys(RMSpropOptions()), (Keys{"w.step", "w.square_avg", "steps"}));
  EXPECT_EQ(keys(RMSpropOptions().momentum(0.9).centered(true)),
            (Keys{"w.step", "w.square_avg", "w.momentum_buffer", "w.grad_avg", "steps"}));
  EXPECT_EQ(keys(RMSpropOptions().centered(true)), (Keys{"w.step", "w.square_avg", "w.grad_avg", "steps"}));
}

TEST(OptimRMSprop, BadOptions) {
  Tensor p = param_of(kInit, kShape);
  EXPECT_THROW(RMSprop(NamedTensors{{"w", p}}, RMSpropOptions(-0.1)), Error);
  EXPECT_THROW(RMSprop(NamedTensors{{"w", p}}, RMSpropOptions().alpha(1.5)), Error);
  EXPECT_THROW(RMSprop(NamedTensors{{"w", p}}, RMSpropOptions().alpha(-0.1)), Error);
  EXPECT_THROW(RMSprop(NamedTensors{{"w", p}}, RMSpropOptions().eps(-1e-8)), Error);
  EXPECT_THROW(RMSprop(NamedTensors{{"w", p}}, RMSpropOptions().momentum(-0.9)), Error);
  EXPECT_THROW(RMSprop(NamedTensors{{"w", p}}, RMSpropOptions().weight_decay(-0.1)), Error);
}

// ---- Lion

TEST(OptimLion, FirstStepsByHand) {
  // lr 0.1, weight_decay 0.5: every step shrinks p by 1 - 0.05 first.
  Tensor p = param_of({1.0}, {1});
  Lion opt(NamedTensors{{"p", p}}, LionOptions(0.1).weight_decay(0.5));
  p.set_grad(full({1}, 2.0, DType::f64));
  opt.step();  // sign(0.9 * 0 + 0.1 * 2) = 1: p = 0.95 - 0.1; m = 0.01 * 2
  EXPECT_NEAR(p.item(), 0.85, 1e-15);
  p.set_grad(full({1}, -1.0, DType::f64));
  opt.step();  // sign(0.9 * 0.02 - 0.1) = -1: p = 0.85 * 0.95 + 0.1; m = 0.99 * 0.02 - 0.01
  EXPECT_NEAR(p.item(), 0.9075, 1e-15);
  p.set_grad(zeros({1}, DType::f64));
  opt.step();  // sign(0.9 * 0.0098) = 1: the momentum alone moves p
  EXPECT_NEAR(p.item(), 0.9075 * 0.95 - 0.1, 1e-15);

  // sign(0) = 0: no momentum and no gradient, no move.
  Tensor q = param_of({1.0, -2.0}, {2});
  Lion still(NamedTensors{{"q", q}}, LionOptions(0.1));
  q.set_grad(from_vector<double>({0.0, 3.0}, {2}));
  still.step();
  EXPECT_EQ(q.to_vector<double>(), (Vec{1.0, -2.1}));
}

TEST(OptimLion, Trajectories) {
  auto check = [](const LionOptions& o, const LionRef& ref) { expect_trajectory<Lion>(kInit, kShape, o, ref, kSteps); };
  check(LionOptions(0.1), LionRef{.lr = 0.1});
  check(LionOptions(0.05).betas({0.8, 0.9}), LionRef{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9});
  check(LionOptions(0.1).weight_decay(0.3), LionRef{.lr = 0.1, .weight_decay = 0.3});
  // Long enough for the gradient to change sign where the momentum has not yet.
  check(LionOptions(0.2).betas({0.95, 0.5}).weight_decay(0.1),
        LionRef{.lr = 0.2, .beta1 = 0.95, .beta2 = 0.5, .weight_decay = 0.1});
  expect_trajectory<Lion>(kInit, kShape, LionOptions(0.2).betas({0.95, 0.5}),
                          LionRef{.lr = 0.2, .beta1 = 0.95, .beta2 = 0.5}, 12);
}

TEST(OptimLion, Float32FollowsFloat64) {
  // Lion's steps are +-lr exactly; f32 differs only by rounding of p (a few ulps of ~3).
  constexpr double kF32Tol = 1e-5;
  expect_trajectory<Lion>(kInit, kShape, LionOptions(0.1).weight_decay(0.2), LionRef{.lr = 0.1, .weight_decay = 0.2},
                          kSteps, DType::f32, kF32Tol);
}

TEST(OptimLion, BadOptions) {
  Tensor p = param_of(kInit, kShape);
  EXPECT_THROW(Lion(NamedTensors{{"w", p}}, LionOptions(-1e-4)), Error);
  EXPECT_THROW(Lion(NamedTensors{{"w", p}}, LionOptions().betas({1.1, 0.99})), Error);
  EXPECT_THROW(Lion(NamedTensors{{"w", p}}, LionOptions().betas({0.9, -0.5})), Error);
  EXPECT_THROW(Lion(NamedTensors{{"w", p}}, LionOptions().weight_decay(-1.0)), Error);
}

}  // namespace
}  // namespace octet
