// LR schedule factors at chosen epochs, composition, and apply_schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/octet.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

namespace octet {
namespace {

// Factors are a few double operations (pow, cos) away from the exact value.
constexpr double kTol = 1e-12;

TEST(Schedule, ConstantAndStep) {
  EXPECT_EQ(constant_schedule()->factor(123.0), 1.0);
  EXPECT_EQ(constant_schedule(0.5)->factor(0.0), 0.5);
  auto s = step_schedule(2.0, 0.5);
  EXPECT_EQ(s->factor(0.0), 1.0);
  EXPECT_EQ(s->factor(1.999), 1.0);
  EXPECT_EQ(s->factor(2.0), 0.5);
  EXPECT_EQ(s->factor(3.5), 0.5);
  EXPECT_EQ(s->factor(4.0), 0.25);
  EXPECT_EQ(s->factor(18.0 / 3.0), 0.125);  // epoch = steps / steps_per_epoch lands exactly on 6
  EXPECT_THROW(step_schedule(0.0, 0.5), Error);
}

TEST(Schedule, MultiStep) {
  auto s = multistep_schedule({6.0, 3.0}, 0.1);  // order does not matter
  EXPECT_EQ(s->factor(0.0), 1.0);
  EXPECT_EQ(s->factor(2.999), 1.0);
  EXPECT_NEAR(s->factor(3.0), 0.1, kTol);
  EXPECT_NEAR(s->factor(5.5), 0.1, kTol);
  EXPECT_NEAR(s->factor(6.0), 0.01, kTol);
  EXPECT_NEAR(s->factor(100.0), 0.01, kTol);
}

TEST(Schedule, Cosine) {
  auto s = cosine_schedule(10.0, 0.1);
  EXPECT_NEAR(s->factor(0.0), 1.0, kTol);
  EXPECT_NEAR(s->factor(5.0), 0.55, kTol);  // midpoint: halfway between 1 and eta_min
  EXPECT_NEAR(s->factor(2.5), 0.1 + 0.9 * (1 + std::cos(std::numbers::pi / 4)) / 2, kTol);
  EXPECT_NEAR(s->factor(10.0), 0.1, kTol);
  EXPECT_NEAR(s->factor(15.0), 0.1, kTol);  // flat after the end
  EXPECT_NEAR(cosine_schedule(4.0)->factor(4.0), 0.0, kTol);
  EXPECT_THROW(cosine_schedule(0.0), Error);
}

TEST(Schedule, WarmupThenCosine) {
  auto s = linear_warmup_schedule(2.0, 0.1, cosine_schedule(8.0));
  EXPECT_NEAR(s->factor(0.0), 0.1, kTol);
  EXPECT_NEAR(s->factor(0.5), 0.325, kTol);  // 0.1 + 0.9 * 0.25
  EXPECT_NEAR(s->factor(1.0), 0.55, kTol);
  EXPECT_NEAR(s->factor(2.0), 1.0, kTol);  // the cosine starts where the ramp ends
  EXPECT_NEAR(s->factor(6.0), 0.5, kTol);  // cosine midpoint, shifted by the warm-up
  EXPECT_NEAR(s->factor(10.0), 0.0, kTol);
  // The ramp meets a schedule that does not start at 1; a null `after` is constant 1.
  EXPECT_NEAR(linear_warmup_schedule(1.0, 0.0, constant_schedule(0.5))->factor(0.5), 0.25, kTol);
  EXPECT_NEAR(linear_warmup_schedule(4.0, 0.0)->factor(1.0), 0.25, kTol);
  EXPECT_EQ(linear_warmup_schedule(4.0, 0.0)->factor(7.0), 1.0);
  // Warm-up into a step schedule: steps counted from the end of the warm-up.
  auto w = linear_warmup_schedule(1.0, 0.5, step_schedule(2.0, 0.1));
  EXPECT_NEAR(w->factor(2.9), 1.0, kTol);
  EXPECT_NEAR(w->factor(3.0), 0.1, kTol);
}

TEST(Schedule, ApplyScalesInitialLr) {
  Tensor a = zeros({2}, DType::f64).requires_grad_(true), b = zeros({2}, DType::f64).requires_grad_(true);
  std::vector<ParamGroup> groups;
  groups.emplace_back(NamedTensors{{"a", a}});
  groups.emplace_back(NamedTensors{{"b", b}}, SGDOptions(0.01));
  SGD opt(groups, SGDOptions(0.1));
  auto s = cosine_schedule(10.0);
  apply_schedule(opt, *s, 5.0);
  EXPECT_NEAR(opt.lr(0), 0.05, kTol);
  EXPECT_NEAR(opt.lr(1), 0.005, kTol);
  apply_schedule(opt, *s, 5.0);  // from initial_lr every time: no compounding
  EXPECT_NEAR(opt.lr(0), 0.05, kTol);
  EXPECT_EQ(opt.initial_lr(0), 0.1);
  EXPECT_THROW(apply_schedule(opt, *s, -1.0), Error);
  EXPECT_THROW(apply_schedule(opt, *s, std::nan("")), Error);
}

// PyTorch's word_language_model example: lr / 4 after every epoch whose validation loss is not a
// new best; with patience, only after that many such epochs in a row.
TEST(Schedule, Plateau) {
  PlateauSchedule p(0.25);
  EXPECT_EQ(p.factor(0.0), 1.0);
  EXPECT_FALSE(p.observe(5.0));
  EXPECT_FALSE(p.observe(4.0));
  EXPECT_TRUE(p.observe(4.0));  // equal is no improvement
  EXPECT_EQ(p.factor(3.0), 0.25);
  EXPECT_TRUE(p.observe(std::nan("")));
  EXPECT_EQ(p.factor(4.0), 0.0625);
  EXPECT_FALSE(p.observe(3.9));
  EXPECT_EQ(p.state().best, 3.9);
  PlateauSchedule q(0.5, 2);
  q.observe(1.0);
  EXPECT_FALSE(q.observe(1.5));
  EXPECT_FALSE(q.observe(1.2));
  EXPECT_TRUE(q.observe(1.1));
  EXPECT_EQ(q.factor(0.0), 0.5);
  EXPECT_EQ(q.state().bad, 0);
  // Its state carries over (a checkpoint), and it composes with a warm-up.
  PlateauSchedule r(0.5, 2);
  r.set_state(q.state());
  EXPECT_EQ(r.factor(0.0), 0.5);
  EXPECT_EQ(r.state().best, 1.0);
  auto s = std::make_shared<PlateauSchedule>(0.25);
  auto warm = linear_warmup_schedule(1.0, 0.0, s);
  s->observe(2.0);
  s->observe(2.0);
  EXPECT_EQ(warm->factor(0.5), 0.125);
  EXPECT_EQ(warm->factor(7.0), 0.25);
  EXPECT_THROW(PlateauSchedule(0.0), Error);
  EXPECT_THROW(PlateauSchedule(0.5, -1), Error);
  EXPECT_THROW(r.set_state({0.0, 1.0, 0}), Error);
}

}  // namespace
}  // namespace octet
