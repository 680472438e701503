// The CPU versions of optim/'s kernels (optim/cpu/kernels.h): a rule over the blocks of any state
// kind (ParamState::for_each_block), the first passes of the layer-wise optimizers
// (optim/cpu/layerwise.h), and clip_grad_norm's sum of squares.
#include <cmath>

#include "optim/cpu/kernels.h"
#include "optim/cpu/layerwise.h"
#include "optim/cpu/rule_loop.h"

namespace octet::optim::cpu {
namespace {

// LAMB's pass 1: the trust ratio of this update, from the old state (read-only).
template <typename T>
double lamb_ratio_of(const LambRule<T>& rule, bool trust_clip, const T* p, const T* g, ParamState& state) {
  BlockSums<2> sums;
  state.read_blocks(BlockRead<T>([&](const StateBlock<const T>& b) {
    double p_sq = 0.0, u_sq = 0.0;
    for (int64_t i = 0; i < b.n; ++i) {
      const T s[2] = {b.buffer(0)[i], b.buffer(1)[i]};
      double t[2];
      rule.terms(p[b.begin + i], g[b.begin + i], s, t);
      p_sq += t[0];
      u_sq += t[1];
    }
    sums.add(b.begin, {p_sq, u_sq});
  }));
  const auto [p_sq, u_sq] = sums.total();
  return lamb_ratio(p_sq, u_sq, trust_clip);
}

}  // namespace

template <typename Rule>
void rule_update(const Rule& rule, const Tensor& param, const Tensor& grad, ParamState& state, const char*) {
  using T = typename Rule::Scalar;
  T* p = param.data<T>();
  const T* g = grad.data<T>();
  const octet::cpu::Isa isa = octet::cpu::active_isa();
  state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { apply_rule(isa, rule, p, g, b); }));
}

template <typename T>
void lamb_update(const LambRule<T>& rule, double lr, bool trust_clip, const Tensor& param, const Tensor& grad,
                 ParamState& state) {
  LambRule<T> scaled = rule;
  const double r = lamb_ratio_of(rule, trust_clip, param.data<T>(), grad.data<T>(), state);
  scaled.set_scale(static_cast<T>(lr * r));
  rule_update(scaled, param, grad, state, "Lamb");
}

template <typename T>
void lars_update(const LarsRule<T>& rule, double trust_coefficient, double weight_decay, double eps,
                 const Tensor& param, const Tensor& grad, ParamState& state) {
  LarsRule<T> scaled = rule;
  const int64_t n = param.numel();
  const double p_sq = octet::sum_squares(param.data<T>(), n),
               g_sq = octet::sum_squares(grad.data<T>(), n, /*finite_only=*/true);
  scaled.set_scale(static_cast<T>(lars_local_lr(p_sq, g_sq, trust_coefficient, weight_decay, eps)));
  rule_update(scaled, param, grad, state, "LARS");  // pass 2: SGD momentum on the scaled gradient
}

// One serial sum in double over the tensors in order, so the result does not depend on the thread
// count.
double sum_squares(const std::vector<Tensor>& xs) {
  double sum_sq = 0.0;
  for (const Tensor& x : xs) {
    Tensor c = x.contiguous();
    dispatch_float(c.dtype(), "clip_grad_norm", [&]<typename T>() {
      const T* v = c.data<T>();
      for (int64_t i = 0, n = c.numel(); i < n; ++i) sum_sq += static_cast<double>(v[i]) * static_cast<double>(v[i]);
    });
  }
  return sum_sq;
}

OCTET_OPTIM_INSTANTIATE_KERNELS()

}  // namespace octet::optim::cpu
