// The per-element update of every optimizer, written once and compiled for the CPU loop and the
// CUDA kernels alike (OCTET_HD). A rule is a small struct of per-step scalars, built on the host
// from the options and the parameter's step count (bias corrections and the like computed once
// in double, then cast to the parameter's type T), with
//   void operator()(T& p, T g, T* s) const     // moves one element p and its state values s
// where s[0..buffers) are the element's values of the state buffers, in the order of the
// optimizer's state_buffers(). The CPU runs it over each block of a ParamState (dense or
// dequantized 8-bit scratch); the CUDA kernels run it over dense device buffers, or over values
// dequantized in registers (optim/cuda/). The same operations in the same order round the same
// way on both, so switching the device changes nothing but the place the loop runs.
//   SgdRule<float> r{...};  float p = 1, s[kMaxStateBuffers] = {0};  r(p, 0.5f, s);
//
// Layer-wise rules (LAMB, LARS) scale the whole update by a ratio of norms. Their sums are
// accumulated in double from the terms below; lamb_ratio() and lars_local_lr() turn the sums into
// the factor. The update then takes it through set_scale() (kScaled): on the CPU from the host,
// on CUDA straight from device memory, so no host synchronization is needed between the passes.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hostdevice.h"

namespace octet {

// The most state buffers any rule uses (Adam with amsgrad, RMSprop centered with momentum).
inline constexpr int kMaxStateBuffers = 3;

// std::max / std::min semantics, NaN included (the second argument wins only if strictly
// greater / smaller), available on the device.
template <typename T>
OCTET_HD inline T max_of(T a, T b) {
  return a < b ? b : a;
}
template <typename T>
OCTET_HD inline T min_of(T a, T b) {
  return b < a ? b : a;
}

// False for inf and NaN (x - x is then NaN), on the host and the device, in a form that vectorizes.
// The loops that run a rule skip an element whose gradient is not finite: its parameter and state
// values stay as they were, as the reference's 8-bit and 32-bit kernels (bitsandbytes) do, so one
// overflowed gradient element does not poison its weight; the layer-wise sums leave it out too.
template <typename T>
OCTET_HD inline bool finite_grad(T g) {
  return g - g == T(0);
}

// g^2 in double, or 0 for a non-finite g (LARS's ||g||^2 leaves out the elements it skips).
template <typename T>
OCTET_HD inline double finite_square(T g) {
  return finite_grad(g) ? static_cast<double>(g) * static_cast<double>(g) : 0.0;
}

// One element through `rule`, or left as it was when g is not finite (see finite_grad): the
// selects, not a branch, keep the CPU loop vectorized.
template <int N, typename Rule, typename T>
OCTET_HD inline void update_element(const Rule& rule, T& p, T g, T* s) {
  T old[N > 0 ? N : 1] = {};
  for (int k = 0; k < N; ++k) old[k] = s[k];
  T next = p;
  rule(next, g, s);
  const bool keep = !finite_grad(g);
  p = keep ? p : next;
  for (int k = 0; k < N; ++k) s[k] = keep ? old[k] : s[k];
}

// torch.sign: 0 stays 0, NaN stays NaN (so divergence stays visible).
template <typename T>
OCTET_HD inline T sign_of(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

// ---- SGD (optim/sgd.h)
template <typename T>
struct SgdRule {
  using Scalar = T;
  static constexpr bool kScaled = false;
  T lr, wd, mom, keep;  // keep = 1 - dampening
  bool decay;           // weight_decay != 0: skipped at 0, so inf/nan weights stay out of d
  bool momentum, nesterov, first;
  int buffers;  // momentum ? 1 : 0

  OCTET_HD void operator()(T& p, T g, T* s) const {
    if (!momentum) {
      p -= lr * (decay ? g + wd * p : g);
      return;
    }
    T d = decay ? g + wd * p : g;
    s[0] = first ? d : mom * s[0] + keep * d;
    p -= lr * (nesterov ? d + mom * s[0] : s[0]);
  }
};

// ---- Adam, AdamW (optim/adam.h): s = m, v[, v_max]
template <typename T>
struct AdamRule {
  using Scalar = T;
  static constexpr bool kScaled = false;
  T step_size, bias_c2_sqrt, b1, b2, one_b1, one_b2, eps, wd, shrink;
  bool l2;     // Adam: weight decay folded into the gradient
  bool decay;  // AdamW: p *= shrink
  bool amsgrad;
  int buffers;

  OCTET_HD void operator()(T& p, T g, T* s) const {
    T grad = l2 ? g + wd * p : g;
    if (decay) p *= shrink;
    s[0] = b1 * s[0] + one_b1 * grad;
    s[1] = b2 * s[1] + one_b2 * (grad * grad);
    T second = s[1];
    if (amsgrad) second = s[2] = max_of(s[2], s[1]);
    T denom = std::sqrt(second) / bias_c2_sqrt + eps;
    p -= step_size * (s[0] / denom);
  }
};

// ---- RMSprop (optim/rmsprop.h): s = square_avg[, momentum_buffer][, grad_avg]
template <typename T>
struct RmspropRule {
  using Scalar = T;
  static constexpr bool kScaled = false;
  T lr, alpha, one_alpha, eps, wd, mom;
  bool decay, momentum, centered;
  int buffers;

  OCTET_HD void operator()(T& p, T g, T* s) const {
    T grad = decay ? g + wd * p : g;
    T& v = s[0];
    v = alpha * v + one_alpha * (grad * grad);
    // grad_avg is s[2] after a momentum buffer, else s[1]: constant indices keep s in registers.
    auto centered_denom = [&](T& g_avg) {
      g_avg = alpha * g_avg + one_alpha * grad;
      return std::sqrt(v - g_avg * g_avg) + eps;
    };
    const T denom = !centered ? std::sqrt(v) + eps : momentum ? centered_denom(s[2]) : centered_denom(s[1]);
    if (momentum) {
      s[1] = mom * s[1] + grad / denom;
      p -= lr * s[1];
    } else {
      p -= lr * (grad / denom);
    }
  }
};

// ---- Adagrad (optim/adagrad.h): s = sum. The state starts at 0 and the first step adds
// initial_accumulator_value, so no state needs another initial value.
template <typename T>
struct AdagradRule {
  using Scalar = T;
  static constexpr bool kScaled = false;
  T clr, wd, init, eps;
  bool decay, first;
  int buffers;  // 1

  OCTET_HD void operator()(T& p, T g, T* s) const {
    const T grad = decay ? g + wd * p : g;
    s[0] = (first ? init : s[0]) + grad * grad;
    p -= clr * (grad / (std::sqrt(s[0]) + eps));
  }
};

// ---- Lion (optim/lion.h): s = exp_avg
template <typename T>
struct LionRule {
  using Scalar = T;
  static constexpr bool kScaled = false;
  T lr, shrink, b1, one_b1, b2, one_b2;
  bool decay;
  int buffers;  // 1

  OCTET_HD void operator()(T& p, T g, T* s) const {
    if (decay) p *= shrink;
    p -= lr * sign_of(b1 * s[0] + one_b1 * g);
    s[0] = b2 * s[0] + one_b2 * g;
  }
};

// ---- LAMB (optim/lamb.h): s = exp_avg, exp_avg_sq; p -= step * u with step = lr * trust ratio
template <typename T>
struct LambRule {
  using Scalar = T;
  static constexpr bool kScaled = true;
  static constexpr int kTerms = 2;  // ||p||^2, ||u||^2
  T b1, b2, one_b1, one_b2, bias_c1, bias_c2_sqrt, eps, wd;
  bool decay;   // skipped at 0, so inf/nan weights stay out of u
  T step;       // lr * ratio: set by the host or, on CUDA, from device memory (set_scale)
  int buffers;  // 2

  // Moves the moments m, v (copies of the old state) one step and returns the direction u.
  OCTET_HD T direction(T p, T g, T& m, T& v) const {
    m = b1 * m + one_b1 * g;
    v = b2 * v + one_b2 * (g * g);
    T u = (m / bias_c1) / (std::sqrt(v) / bias_c2_sqrt + eps);
    return decay ? u + wd * p : u;
  }
  // The first pass: this element's terms of ||p||^2 and ||u||^2, from the old state (unchanged);
  // an element with a non-finite gradient adds its ||p||^2 but no update.
  OCTET_HD void terms(T p, T g, const T* s, double* t) const {
    T m = s[0], v = s[1];
    const double u = finite_grad(g) ? static_cast<double>(direction(p, g, m, v)) : 0.0;
    t[0] = static_cast<double>(p) * static_cast<double>(p);
    t[1] = u * u;
  }
  OCTET_HD void set_scale(T s) { step = s; }
  OCTET_HD void operator()(T& p, T g, T* s) const {
    T m = s[0], v = s[1];
    const T u = direction(p, g, m, v);
    s[0] = m;
    s[1] = v;
    p -= step * u;
  }
};

// ---- LARS (optim/lars.h): s = momentum_buffer when momentum != 0; d = (g + wd * p) * scale
template <typename T>
struct LarsRule {
  using Scalar = T;
  static constexpr bool kScaled = true;
  T lr, wd, mom;
  T scale;  // the local lr: set by the host or, on CUDA, from device memory (set_scale)
  bool decay, momentum, first;
  int buffers;  // momentum ? 1 : 0

  OCTET_HD void set_scale(T s) { scale = s; }
  OCTET_HD void operator()(T& p, T g, T* s) const {
    if (!momentum) {
      p -= lr * ((decay ? g + wd * p : g) * scale);
      return;
    }
    const T d = (decay ? g + wd * p : g) * scale;
    s[0] = first ? d : mom * s[0] + d;
    p -= lr * s[0];
  }
};

// ---- layer-wise factors, from sums of squares accumulated in double

// numerator / denominator, or 1 when either is 0: a zero weight (fresh bias) or a zero update
// must not freeze or blow up the layer. NaNs pass through, so divergence stays visible.
OCTET_HD inline double trust_ratio(double numerator, double denominator) {
  if (numerator == 0.0 || denominator == 0.0) return 1.0;
  return numerator / denominator;
}

// The norms of whole parameters (LAMB, LARS, clip_grad_norm) are sums over units of kSumUnit
// elements counted from the parameter's (or its shard's) first: each unit's terms added in double in
// element order, the units' sums added exactly (ExactSum), on the CPU (optim/cpu/layerwise.h) and
// on CUDA (optim/cuda/update.cu) alike. 64, the smallest 8-bit block size (StateOptions::
// block_size), so every shard boundary is a unit boundary.
inline constexpr int64_t kSumUnit = 64;

// LAMB's r = ||p|| / ||u||, clamped to 1 with trust_clip.
OCTET_HD inline double lamb_ratio(double p_sq, double u_sq, bool trust_clip) {
  const double r = trust_ratio(std::sqrt(p_sq), std::sqrt(u_sq));
  return trust_clip ? min_of(r, 1.0) : r;
}

// LARS's trust_coefficient * ||p|| / (||g|| + weight_decay * ||p|| + eps), or 1 when ||p|| or
// ||g|| is 0.
OCTET_HD inline double lars_local_lr(double p_sq, double g_sq, double trust_coefficient, double weight_decay,
                                     double eps) {
  const double p_norm = std::sqrt(p_sq), g_norm = std::sqrt(g_sq);
  if (p_norm == 0.0 || g_norm == 0.0) return 1.0;
  return trust_coefficient * p_norm / (g_norm + weight_decay * p_norm + eps);
}

}  // namespace octet
