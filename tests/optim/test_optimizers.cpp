// SGD, Adam and AdamW trajectories against scalar references; parameter groups; skipped params.
#include <gtest/gtest.h>

#include <cmath>

#include "core/octet.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "optim_test_util.h"

namespace octet {
namespace {

using namespace octet::testing;

const Vec kInit = {0.5, -1.25, 2.0, 0.75, -0.1, 3.0};
const Shape kShape = {2, 3};
constexpr int kSteps = 3;

template <typename Opt, typename Options, typename Ref>
void check_trajectory(const Options& options, const Ref& ref, int steps = kSteps) {
  Tensor p = param_of(kInit, kShape);
  Opt opt(NamedTensors{{"w", p}}, options);
  run_steps(opt, {p}, 0, steps);
  expect_near(p.to_vector<double>(), ref_trajectory(ref, kInit, steps), kTrajectoryTol);
  EXPECT_EQ(opt.steps(), steps);
}

TEST(OptimSGD, FirstStepsByHand) {
  // p = 1, g = 1 each step, lr 0.1, momentum 0.9: p1 = 0.9; buf = 0.9 + 1 = 1.9, p2 = 0.9 - 0.19.
  Tensor p = param_of({1.0}, {1});
  SGD opt(NamedTensors{{"p", p}}, SGDOptions(0.1).momentum(0.9));
  p.set_grad(ones({1}, DType::f64));
  opt.step();
  EXPECT_DOUBLE_EQ(p.item(), 0.9);
  opt.step();  // the grad stays until zero_grad
  EXPECT_DOUBLE_EQ(p.item(), 0.71);
}

TEST(OptimSGD, Trajectories) {
  check_trajectory<SGD>(SGDOptions(0.1), SgdRef{.lr = 0.1});
  check_trajectory<SGD>(SGDOptions(0.1).momentum(0.9), SgdRef{.lr = 0.1, .momentum = 0.9});
  check_trajectory<SGD>(SGDOptions(0.05).momentum(0.8).dampening(0.3),
                        SgdRef{.lr = 0.05, .momentum = 0.8, .dampening = 0.3});
  check_trajectory<SGD>(SGDOptions(0.1).momentum(0.9).nesterov(true),
                        SgdRef{.lr = 0.1, .momentum = 0.9, .nesterov = true});
  check_trajectory<SGD>(SGDOptions(0.1).weight_decay(0.01), SgdRef{.lr = 0.1, .weight_decay = 0.01});
  check_trajectory<SGD>(SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(5e-2),
                        SgdRef{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-2, .nesterov = true});
}

TEST(OptimSGD, BadOptions) {
  Tensor p = param_of(kInit, kShape);
  EXPECT_THROW(SGD(NamedTensors{{"w", p}}, SGDOptions(0.1).nesterov(true)), Error);  // no momentum
  EXPECT_THROW(SGD(NamedTensors{{"w", p}}, SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)), Error);
  EXPECT_THROW(SGD(NamedTensors{{"w", p}}, SGDOptions(-1.0)), Error);
  EXPECT_THROW(SGD(NamedTensors{{"w", p}}, SGDOptions(0.1).weight_decay(-1.0)), Error);
  EXPECT_THROW(SGD(NamedTensors{{"w", p}, {"w", p}}, SGDOptions(0.1)), Error);     // duplicate name
  EXPECT_THROW(SGD(NamedTensors{{"w", p}, {"tied", p}}, SGDOptions(0.1)), Error);  // one tensor twice
  EXPECT_THROW(SGD(NamedTensors{{"i", zeros({2}, DType::i64)}}, SGDOptions(0.1)), Error);
}

TEST(OptimAdam, FirstStepByHand) {
  // After one step m^ = g and v^ = g^2, so p moves by lr * g / (|g| + eps).
  Tensor p = param_of({1.0}, {1});
  Adam opt(NamedTensors{{"p", p}}, AdamOptions(0.1));
  p.set_grad(full({1}, 2.0, DType::f64));
  opt.step();
  EXPECT_NEAR(p.item(), 1.0 - 0.1 * 2.0 / (2.0 + 1e-8), 1e-15);
}

TEST(OptimAdam, Trajectories) {
  check_trajectory<Adam>(AdamOptions(0.1), AdamRef{.lr = 0.1});
  check_trajectory<Adam>(AdamOptions(0.05).betas({0.8, 0.99}).eps(1e-6),
                         AdamRef{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6});
  check_trajectory<Adam>(AdamOptions(0.1).weight_decay(0.1), AdamRef{.lr = 0.1, .weight_decay = 0.1});
  check_trajectory<Adam>(AdamOptions(0.1).amsgrad(true), AdamRef{.lr = 0.1, .amsgrad = true});
  // Long enough for v to shrink somewhere, so amsgrad's max actually differs from v.
  check_trajectory<Adam>(AdamOptions(0.3).betas({0.5, 0.6}).amsgrad(true).weight_decay(0.05),
                         AdamRef{.lr = 0.3, .beta1 = 0.5, .beta2 = 0.6, .weight_decay = 0.05, .amsgrad = true}, 8);
}

TEST(OptimAdam, AmsgradDiffers) {
  Tensor a = param_of(kInit, kShape), b = param_of(kInit, kShape);
  Adam plain(NamedTensors{{"w", a}}, AdamOptions(0.3).betas({0.5, 0.6}));
  Adam ams(NamedTensors{{"w", b}}, AdamOptions(0.3).betas({0.5, 0.6}).amsgrad(true));
  run_steps(plain, {a}, 0, 8);
  run_steps(ams, {b}, 0, 8);
  EXPECT_NE(a.to_vector<double>(), b.to_vector<double>());
}

TEST(OptimAdam, Float32FollowsFloat64) {
  // f32 arithmetic over 5 steps of size ~lr: errors of a few f32 ulps of the values (~1e-7).
  constexpr double kF32Tol = 1e-5;
  expect_trajectory<Adam>(kInit, kShape, AdamOptions(0.1).weight_decay(0.01).amsgrad(true),
                          AdamRef{.lr = 0.1, .weight_decay = 0.01, .amsgrad = true}, 5, DType::f32, kF32Tol);
}

TEST(OptimAdam, LargeParamRunsInBlocks) {
  // Large enough for DenseState to split the update across threads; blocks must not interact.
  Vec init(100003);
  for (size_t i = 0; i < init.size(); ++i) init[i] = std::sin(0.37 * static_cast<double>(i));
  Tensor p = param_of(init, {static_cast<int64_t>(init.size())});
  Adam opt(NamedTensors{{"w", p}}, AdamOptions(0.1).amsgrad(true).weight_decay(0.01));
  run_steps(opt, {p}, 0, kSteps);
  Vec want = ref_trajectory(AdamRef{.lr = 0.1, .weight_decay = 0.01, .amsgrad = true}, init, kSteps);
  std::vector<double> got = p.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LE(worst, kTrajectoryTol);
}

TEST(OptimAdam, BadOptions) {
  Tensor p = param_of(kInit, kShape);
  EXPECT_THROW(Adam(NamedTensors{{"w", p}}, AdamOptions(0.1).betas({1.0, 0.999})), Error);
  EXPECT_THROW(Adam(NamedTensors{{"w", p}}, AdamOptions(0.1).eps(-1)), Error);
  EXPECT_THROW(AdamW(NamedTensors{{"w", p}}, AdamWOptions(0.1).weight_decay(-0.1)), Error);
}

TEST(OptimAdamW, Trajectories) {
  EXPECT_EQ(AdamWOptions().weight_decay_, 1e-2);
  EXPECT_EQ(AdamOptions().weight_decay_, 0.0);
  check_trajectory<AdamW>(AdamWOptions(0.1), AdamRef{.lr = 0.1, .weight_decay = 1e-2, .decoupled = true});
  check_trajectory<AdamW>(AdamWOptions(0.1).weight_decay(0.2).amsgrad(true),
                          AdamRef{.lr = 0.1, .weight_decay = 0.2, .amsgrad = true, .decoupled = true});
  // Decoupled decay is not L2: the trajectories differ.
  Tensor a = param_of(kInit, kShape), b = param_of(kInit, kShape);
  Adam l2(NamedTensors{{"w", a}}, AdamOptions(0.1).weight_decay(0.2));
  AdamW decoupled(NamedTensors{{"w", b}}, AdamWOptions(0.1).weight_decay(0.2));
  run_steps(l2, {a}, 0, 2);
  run_steps(decoupled, {b}, 0, 2);
  EXPECT_NE(a.to_vector<double>(), b.to_vector<double>());
}

TEST(OptimGroups, PerGroupOptions) {
  Tensor a = param_of(kInit, kShape), b = param_of(kInit, kShape), c = param_of(kInit, kShape);
  std::vector<ParamGroup> groups;
  groups.emplace_back(NamedTensors{{"a", a}});                                  // defaults
  groups.emplace_back(NamedTensors{{"b", b}}, SGDOptions(0.01).momentum(0.5));  // own options
  groups.emplace_back(NamedTensors{{"c", c}}, SGDOptions(0.2).weight_decay(0.1));
  SGD opt(groups, SGDOptions(0.1).momentum(0.9));
  ASSERT_EQ(opt.num_groups(), 3u);
  EXPECT_EQ(opt.lr(0), 0.1);
  EXPECT_EQ(opt.lr(1), 0.01);
  EXPECT_EQ(opt.initial_lr(2), 0.2);
  EXPECT_EQ(opt.options(1).momentum_, 0.5);
  run_steps(opt, {a, b, c}, 0, kSteps);
  expect_near(a.to_vector<double>(), ref_trajectory(SgdRef{.lr = 0.1, .momentum = 0.9}, kInit, kSteps), kTrajectoryTol);
  expect_near(b.to_vector<double>(), ref_trajectory(SgdRef{.lr = 0.01, .momentum = 0.5}, kInit, kSteps),
              kTrajectoryTol);
  expect_near(c.to_vector<double>(), ref_trajectory(SgdRef{.lr = 0.2, .weight_decay = 0.1}, kInit, kSteps),
              kTrajectoryTol);

  opt.set_lr(1, 0.5);
  EXPECT_EQ(opt.lr(1), 0.5);
  EXPECT_EQ(opt.initial_lr(1), 0.01);
  EXPECT_THROW(opt.lr(3), Error);
  EXPECT_THROW(opt.set_lr(0, -1.0), Error);
}

TEST(OptimGroups, WrongOptionsKind) {
  std::vector<ParamGroup> groups;
  groups.emplace_back(NamedTensors{{"a", param_of(kInit, kShape)}}, AdamOptions(0.1));
  EXPECT_THROW(SGD(groups, SGDOptions(0.1)), Error);
  // Names must be unique across groups too.
  groups.emplace_back(NamedTensors{{"a", param_of(kInit, kShape)}});
  EXPECT_THROW(Adam(groups, AdamOptions(0.1)), Error);
}

TEST(OptimGroups, ParamsWithoutGradAreSkipped) {
  Tensor a = param_of(kInit, kShape), frozen = param_of(kInit, kShape);
  Adam opt(NamedTensors{{"a", a}, {"frozen", frozen}}, AdamOptions(0.1));
  run_steps(opt, {a}, 0, kSteps);
  EXPECT_EQ(frozen.to_vector<double>(), kInit);
  expect_near(a.to_vector<double>(), ref_trajectory(AdamRef{.lr = 0.1}, kInit, kSteps), kTrajectoryTol);
  NamedTensors state = opt.state_dict();
  auto find = [&](const std::string& key) {
    for (auto& [k, t] : state)
      if (k == key) return t;
    ADD_FAILURE() << "no key " << key;
    return Tensor();
  };
  EXPECT_EQ(find("a.step").item<int64_t>(), kSteps);
  EXPECT_EQ(find("frozen.step").item<int64_t>(), 0);
  EXPECT_EQ(find("frozen.exp_avg").to_vector<double>(), Vec(6, 0.0));

  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  opt.step();  // nothing has a grad: nothing moves
  EXPECT_EQ(find("a.step").item<int64_t>(), kSteps);
  EXPECT_EQ(opt.steps(), kSteps + 1);
}

TEST(OptimGroups, StepBumpsVersionAndHandlesViews) {
  Tensor p = param_of(kInit, kShape);
  SGD opt(NamedTensors{{"p", p}}, SGDOptions(0.1));
  uint64_t v0 = p.storage()->version();
  run_steps(opt, {p}, 0, 1);
  EXPECT_GT(p.storage()->version(), v0);  // autograd can tell p changed

  // A non-contiguous parameter (a transposed view) is updated through a copy.
  Tensor base = from_vector<double>(kInit, kShape);
  Tensor view = base.t();
  SGD opt_view(NamedTensors{{"v", view}}, SGDOptions(0.1));
  Vec init_t = view.contiguous().to_vector<double>();  // row-major order of the view
  run_steps(opt_view, {view}, 0, kSteps);
  expect_near(view.contiguous().to_vector<double>(), ref_trajectory(SgdRef{.lr = 0.1}, init_t, kSteps), kTrajectoryTol);
  EXPECT_EQ(base.t().contiguous().to_vector<double>(), view.contiguous().to_vector<double>());  // written back
}

TEST(OptimGroups, GradMismatch) {
  Tensor p = param_of(kInit, kShape);
  SGD opt(NamedTensors{{"p", p}}, SGDOptions(0.1));
  p.set_grad(zeros(kShape, DType::f32));
  try {
    opt.step();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'p'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace octet
