// LAMB and LARS: hand-computed first steps, trajectories against scalar references whose
// layer-wise norms are plain loops over the whole tensor, blocks and threads, options.
#include <gtest/gtest.h>

#include <cmath>

#include "core/octet.h"
#include "core/parallel.h"
#include "optim/lamb.h"
#include "optim/lars.h"
#include "optim_test_util.h"

namespace octet {
namespace {

using namespace octet::testing;

const Vec kInit = {0.5, -1.25, 2.0, 0.75, -0.1, 3.0};
const Shape kShape = {2, 3};
constexpr int kSteps = 5;

// LAMB written straight from the formulas in optim/lamb.h.
struct LambRef {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0;
  bool trust_clip = false, layer_adaptation = true;
  Vec m{}, v{};
  int t = 0;
  void step(Vec& p, const Vec& g) {
    ++t;
    m.resize(p.size()), v.resize(p.size());
    double c1 = 1 - std::pow(beta1, t), c2 = 1 - std::pow(beta2, t);
    Vec u(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      u[i] = (m[i] / c1) / (std::sqrt(v[i]) / std::sqrt(c2) + eps) + weight_decay * p[i];
    }
    double p_norm = norm2(p), u_norm = norm2(u);
    double r = p_norm > 0 && u_norm > 0 ? p_norm / u_norm : 1.0;
    if (trust_clip) r = std::min(r, 1.0);
    if (!layer_adaptation) r = 1.0;
    for (size_t i = 0; i < p.size(); ++i) p[i] -= lr * r * u[i];
  }
};

// LARS written straight from the formulas in optim/lars.h.
struct LarsRef {
  double lr, momentum = 0.9, weight_decay = 0, trust_coefficient = 0.001, eps = 1e-8;
  bool layer_adaptation = true;
  Vec buf{};
  int t = 0;
  void step(Vec& p, const Vec& g) {
    ++t;
    buf.resize(p.size());
    double p_norm = norm2(p), g_norm = norm2(g);
    double local_lr =
        p_norm > 0 && g_norm > 0 ? trust_coefficient * p_norm / (g_norm + weight_decay * p_norm + eps) : 1.0;
    if (!layer_adaptation) local_lr = 1.0;
    for (size_t i = 0; i < p.size(); ++i) {
      double d = (g[i] + weight_decay * p[i]) * local_lr;
      buf[i] = t == 1 || momentum == 0 ? d : momentum * buf[i] + d;
      p[i] -= lr * buf[i];
    }
  }
};

// A parameter of 100003 elements: four DenseState blocks, run on several threads.
Vec large_init() {
  Vec init(100003);
  for (size_t i = 0; i < init.size(); ++i) init[i] = std::sin(0.37 * static_cast<double>(i));
  return init;
}

// Runs `steps` steps on a large parameter with `threads` threads; returns the values.
template <typename Opt, typename Options>
std::vector<double> run_large(const Options& o, int threads, int steps) {
  const int before = get_num_threads();
  set_num_threads(threads);
  Vec init = large_init();
  Tensor p = param_of(init, {static_cast<int64_t>(init.size())});
  Opt opt(NamedTensors{{"w", p}}, o);
  run_steps(opt, {p}, 0, steps);
  set_num_threads(before);
  return p.to_vector<double>();
}

// ---- LAMB

TEST(OptimLamb, FirstStepByHand) {
  // After one step m^ = g and v^ = g^2, so with eps 0 u = sign(g) (+ wd p). p = (3, 4): ||p|| = 5.
  Tensor p = param_of({3.0, 4.0}, {2});
  Lamb opt(NamedTensors{{"p", p}}, LambOptions(0.1).eps(0));
  p.set_grad(from_vector<double>({1.0, -2.0}, {2}));
  opt.step();  // u = (1, -1), ||u|| = sqrt(2), r = 5 / sqrt(2)
  const double r = 5.0 / std::sqrt(2.0);
  expect_near(p.to_vector<double>(), {3.0 - 0.1 * r, 4.0 + 0.1 * r}, 1e-15);

  // With weight decay 0.1: u = (1 + 0.3, -1 + 0.4), ||u|| = sqrt(2.05).
  Tensor q = param_of({3.0, 4.0}, {2});
  Lamb decayed(NamedTensors{{"q", q}}, LambOptions(0.1).eps(0).weight_decay(0.1));
  q.set_grad(from_vector<double>({1.0, -2.0}, {2}));
  decayed.step();
  const double rq = 5.0 / std::sqrt(2.05);
  expect_near(q.to_vector<double>(), {3.0 - 0.1 * rq * 1.3, 4.0 + 0.1 * rq * 0.6}, 1e-15);

  // trust_clip: r = 3.54 is clamped to 1, so p moves by lr * u.
  Tensor c = param_of({3.0, 4.0}, {2});
  Lamb clipped(NamedTensors{{"c", c}}, LambOptions(0.1).eps(0).trust_clip(true));
  c.set_grad(from_vector<double>({1.0, -2.0}, {2}));
  clipped.step();
  expect_near(c.to_vector<double>(), {2.9, 4.1}, 1e-15);

  // A zero parameter (a fresh bias) has ||p|| = 0: r = 1 instead of freezing it.
  Tensor z = param_of({0.0, 0.0}, {2});
  Lamb fresh(NamedTensors{{"z", z}}, LambOptions(0.1).eps(0));
  z.set_grad(from_vector<double>({1.0, -2.0}, {2}));
  fresh.step();
  expect_near(z.to_vector<double>(), {-0.1, 0.1}, 1e-15);
}

TEST(OptimLamb, Trajectories) {
  auto check = [](const LambOptions& o, const LambRef& ref) { expect_trajectory<Lamb>(kInit, kShape, o, ref, kSteps); };
  check(LambOptions(0.1), LambRef{.lr = 0.1});
  check(LambOptions(0.05).betas({0.8, 0.99}).eps(1e-8), LambRef{.lr = 0.05, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-8});
  check(LambOptions(0.1).weight_decay(0.1), LambRef{.lr = 0.1, .weight_decay = 0.1});
  check(LambOptions(0.1).weight_decay(0.1).trust_clip(true),
        LambRef{.lr = 0.1, .weight_decay = 0.1, .trust_clip = true});
  check(LambOptions(0.1).weight_decay(0.1).layer_adaptation(false),
        LambRef{.lr = 0.1, .weight_decay = 0.1, .layer_adaptation = false});
}

TEST(OptimLamb, TrustRatioMatters) {
  // ||kInit|| ~ 3.9 and ||u|| ~ sqrt(6): r ~ 1.6, so each variant takes another path.
  auto run = [](const LambOptions& o) {
    Tensor p = param_of(kInit, kShape);
    Lamb opt(NamedTensors{{"w", p}}, o);
    run_steps(opt, {p}, 0, 2);
    return p.to_vector<double>();
  };
  EXPECT_NE(run(LambOptions(0.1)), run(LambOptions(0.1).layer_adaptation(false)));
  EXPECT_NE(run(LambOptions(0.1)), run(LambOptions(0.1).trust_clip(true)));
}

TEST(OptimLamb, GroupsAdaptPerTensor) {
  // Two tensors in one group each get their own ratio; a bias group can opt out.
  Tensor a = param_of(kInit, kShape), b = param_of({0.3, -0.2}, {2}), bias = param_of({0.0, 0.1}, {2});
  std::vector<ParamGroup> groups;
  groups.emplace_back(NamedTensors{{"a", a}, {"b", b}});
  groups.emplace_back(NamedTensors{{"bias", bias}}, LambOptions(0.1).layer_adaptation(false));
  Lamb opt(groups, LambOptions(0.1).weight_decay(0.01));
  run_steps(opt, {a, b, bias}, 0, kSteps);
  const LambRef decayed{.lr = 0.1, .weight_decay = 0.01};
  expect_near(a.to_vector<double>(), ref_trajectory(decayed, kInit, kSteps), kTrajectoryTol);
  expect_near(b.to_vector<double>(), ref_trajectory(decayed, {0.3, -0.2}, kSteps), kTrajectoryTol);
  expect_near(bias.to_vector<double>(),
              ref_trajectory(LambRef{.lr = 0.1, .layer_adaptation = false}, {0.0, 0.1}, kSteps), kTrajectoryTol);
}

TEST(OptimLamb, LargeParamIsThreadCountIndependent) {
  const LambOptions o = LambOptions(0.01).weight_decay(0.01);
  std::vector<double> one = run_large<Lamb>(o, 1, 3), two = run_large<Lamb>(o, 2, 3);
  EXPECT_EQ(one, two);  // bit for bit: the norms are summed per block, in block order
  EXPECT_LE(max_abs_diff(one, ref_trajectory(LambRef{.lr = 0.01, .weight_decay = 0.01}, large_init(), 3)),
            kTrajectoryTol);
}

TEST(OptimLamb, Float32FollowsFloat64) {
  // f32 arithmetic over 5 steps of size ~lr * r: a few f32 ulps of the values (~1e-7).
  constexpr double kF32Tol = 1e-5;
  expect_trajectory<Lamb>(kInit, kShape, LambOptions(0.1).weight_decay(0.05), LambRef{.lr = 0.1, .weight_decay = 0.05},
                          kSteps, DType::f32, kF32Tol);
}

TEST(OptimLamb, BadOptions) {
  Tensor p = param_of(kInit, kShape);
  EXPECT_THROW(Lamb(NamedTensors{{"w", p}}, LambOptions(-1e-3)), Error);
  EXPECT_THROW(Lamb(NamedTensors{{"w", p}}, LambOptions().betas({0.9, 1.0})), Error);
  EXPECT_THROW(Lamb(NamedTensors{{"w", p}}, LambOptions().betas({-0.1, 0.999})), Error);
  EXPECT_THROW(Lamb(NamedTensors{{"w", p}}, LambOptions().eps(-1e-6)), Error);
  EXPECT_THROW(Lamb(NamedTensors{{"w", p}}, LambOptions().weight_decay(-0.01)), Error);
}

// ---- LARS

TEST(OptimLARS, FirstStepsByHand) {
  // p = (3, 4), g = (0.6, 0.8): ||p|| = 5, ||g|| = 1, so local_lr = 0.001 * 5 = 0.005 and
  // buf1 = 0.005 g = (0.003, 0.004). lr 1, eps 0.
  Tensor p = param_of({3.0, 4.0}, {2});
  Lars opt(NamedTensors{{"p", p}}, LarsOptions(1.0).eps(0));
  p.set_grad(from_vector<double>({0.6, 0.8}, {2}));
  opt.step();
  expect_near(p.to_vector<double>(), {2.997, 3.996}, 1e-15);
  // p1 = 0.999 (3, 4): local_lr = 0.004995; buf2 = 0.9 buf1 + 0.004995 g = (0.005697, 0.007596).
  opt.step();
  expect_near(p.to_vector<double>(), {2.997 - 0.005697, 3.996 - 0.007596}, 1e-15);

  // Weight decay 0.1: local_lr = 0.001 * 5 / (1 + 0.5), d = (g + 0.1 p) local_lr = (0.003, 0.004).
  Tensor q = param_of({3.0, 4.0}, {2});
  Lars decayed(NamedTensors{{"q", q}}, LarsOptions(1.0).eps(0).weight_decay(0.1));
  q.set_grad(from_vector<double>({0.6, 0.8}, {2}));
  decayed.step();
  expect_near(q.to_vector<double>(), {2.997, 3.996}, 1e-15);

  // ||p|| = 0: local_lr = 1, the plain gradient step.
  Tensor z = param_of({0.0, 0.0}, {2});
  Lars fresh(NamedTensors{{"z", z}}, LarsOptions(0.1).momentum(0));
  z.set_grad(from_vector<double>({0.6, 0.8}, {2}));
  fresh.step();
  expect_near(z.to_vector<double>(), {-0.06, -0.08}, 1e-15);
}

TEST(OptimLARS, Trajectories) {
  auto check = [](const LarsOptions& o, const LarsRef& ref) { expect_trajectory<Lars>(kInit, kShape, o, ref, kSteps); };
  check(LarsOptions(1.0), LarsRef{.lr = 1.0});
  // A large trust coefficient, so the steps are large enough to feed back into the norms.
  check(LarsOptions(1.0).trust_coefficient(0.05), LarsRef{.lr = 1.0, .trust_coefficient = 0.05});
  check(LarsOptions(2.0).trust_coefficient(0.05).weight_decay(0.1).momentum(0.8),
        LarsRef{.lr = 2.0, .momentum = 0.8, .weight_decay = 0.1, .trust_coefficient = 0.05});
  check(LarsOptions(2.0).trust_coefficient(0.05).momentum(0).eps(1e-3),
        LarsRef{.lr = 2.0, .momentum = 0, .trust_coefficient = 0.05, .eps = 1e-3});
  check(LarsOptions(0.1).weight_decay(0.01).layer_adaptation(false),
        LarsRef{.lr = 0.1, .weight_decay = 0.01, .layer_adaptation = false});
}

TEST(OptimLARS, LargeParamIsThreadCountIndependent) {
  const LarsOptions o = LarsOptions(1.0).trust_coefficient(0.02).weight_decay(0.01);
  std::vector<double> one = run_large<Lars>(o, 1, 3), two = run_large<Lars>(o, 2, 3);
  EXPECT_EQ(one, two);
  const LarsRef ref{.lr = 1.0, .weight_decay = 0.01, .trust_coefficient = 0.02};
  EXPECT_LE(max_abs_diff(one, ref_trajectory(ref, large_init(), 3)), kTrajectoryTol);
}

TEST(OptimLARS, StateBuffers) {
  EXPECT_EQ(Lars(NamedTensors{{"w", param_of(kInit, kShape)}}, LarsOptions()).state_dict().size(), 3u);
  EXPECT_EQ(Lars(NamedTensors{{"w", param_of(kInit, kShape)}}, LarsOptions().momentum(0)).state_dict().size(), 2u);
}

TEST(OptimLARS, BadOptions) {
  Tensor p = param_of(kInit, kShape);
  EXPECT_THROW(Lars(NamedTensors{{"w", p}}, LarsOptions(-1.0)), Error);
  EXPECT_THROW(Lars(NamedTensors{{"w", p}}, LarsOptions().momentum(-0.9)), Error);
  EXPECT_THROW(Lars(NamedTensors{{"w", p}}, LarsOptions().weight_decay(-1e-4)), Error);
  EXPECT_THROW(Lars(NamedTensors{{"w", p}}, LarsOptions().trust_coefficient(0)), Error);
  EXPECT_THROW(Lars(NamedTensors{{"w", p}}, LarsOptions().eps(-1e-8)), Error);
}

}  // namespace
}  // namespace octet
