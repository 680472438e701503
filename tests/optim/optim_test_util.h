// Shared helpers of the optimizer tests: a deterministic gradient that depends on the parameter
// (so an error in one step propagates into the next) and plain scalar reference optimizers
// written straight from the formulas in optim/sgd.h and optim/adam.h (the references of the
// other optimizers live in their test files).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/octet.h"
#include "optim/optimizer.h"

namespace octet::testing {

using Vec = std::vector<double>;

// Every reference is evaluated in f64 with the same operation order, so only rounding of the
// reordered scalar coefficients separates it from the optimizer: far below 1e-12.
constexpr double kTrajectoryTol = 1e-12;

// g = 2p - 0.3 (i + 1) + 0.05 k at step k: the gradient of a shifted quadratic plus a drift.
inline Vec grad_of(const Vec& p, int k) {
  Vec g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = 2.0 * p[i] - 0.3 * static_cast<double>(i + 1) + 0.05 * k;
  return g;
}

inline Tensor param_of(const Vec& v, const Shape& shape, DType dtype = DType::f64) {
  return from_vector<double>(v, shape).to(dtype).requires_grad_(true);
}

// Sets each param's grad to grad_of(param values, k) and steps, for k in [first, first + steps).
inline void run_steps(Optimizer& opt, const std::vector<Tensor>& params, int first, int steps) {
  for (int k = first; k < first + steps; ++k) {
    for (const Tensor& p : params) {
      Tensor g = from_vector<double>(grad_of(p.to_vector<double>(), k), p.shape()).to(p.dtype());
      p.set_grad(g);
    }
    opt.step();
  }
}

inline void expect_near(const std::vector<double>& got, const Vec& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

struct SgdRef {
  double lr, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  Vec buf{};
  int t = 0;
  void step(Vec& p, const Vec& g) {
    ++t;
    buf.resize(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      double d = g[i] + weight_decay * p[i];
      if (momentum != 0) {
        buf[i] = t == 1 ? d : momentum * buf[i] + (1 - dampening) * d;
        d = nesterov ? d + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * d;
    }
  }
};

struct AdamRef {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool amsgrad = false, decoupled = false;
  Vec m{}, v{}, v_max{};
  int t = 0;
  void step(Vec& p, const Vec& g_in) {
    ++t;
    m.resize(p.size()), v.resize(p.size()), v_max.resize(p.size());
    double c1 = 1 - std::pow(beta1, t), c2 = 1 - std::pow(beta2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = g_in[i];
      if (decoupled) {
        p[i] *= 1 - lr * weight_decay;
      } else {
        g += weight_decay * p[i];
      }
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      v_max[i] = std::max(v_max[i], v[i]);
      double denom = std::sqrt(amsgrad ? v_max[i] : v[i]) / std::sqrt(c2) + eps;
      p[i] -= lr / c1 * m[i] / denom;
    }
  }
};

// Runs `steps` steps of a reference on p with the same gradients as run_steps.
template <typename Ref>
Vec ref_trajectory(Ref ref, Vec p, int steps) {
  for (int k = 0; k < steps; ++k) ref.step(p, grad_of(p, k));
  return p;
}

// Runs `steps` steps of Opt on one parameter (f64 unless `dtype` says otherwise) and expects the
// reference's f64 trajectory within `tol`.
template <typename Opt, typename Options, typename Ref>
void expect_trajectory(const Vec& init, const Shape& shape, const Options& options, const Ref& ref, int steps,
                       DType dtype = DType::f64, double tol = kTrajectoryTol) {
  Tensor p = param_of(init, shape, dtype);
  Opt opt(NamedTensors{{"w", p}}, options);
  run_steps(opt, {p}, 0, steps);
  expect_near(p.to_vector<double>(), ref_trajectory(ref, init, steps), tol);
  EXPECT_EQ(opt.steps(), steps);
}

// The largest |got - want| over all elements (for parameters too large to report one by one).
inline double max_abs_diff(const std::vector<double>& got, const Vec& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

// sqrt(sum x^2) in one plain loop: what the layer-wise references use.
inline double norm2(const Vec& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}

}  // namespace octet::testing
