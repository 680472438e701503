// The CPU versions of optim/'s kernels (optim/cpu/kernels.h): a rule over the blocks of any state
// kind (ParamState::for_each_block), the first passes of the layer-wise optimizers and
// clip_grad_norm's sum of squares (exact sums of units, optim/cpu/layerwise.h).
#include <cmath>

#include "optim/cpu/kernels.h"
#include "optim/cpu/layerwise.h"
#include "optim/cpu/rule_loop.h"

namespace octet::optim::cpu {

template <typename Rule>
void rule_update(const Rule& rule, const Tensor& param, const Tensor& grad, ParamState& state, const char*) {
  using T = typename Rule::Scalar;
  T* p = param.data<T>();
  const T* g = grad.data<T>();
  const octet::cpu::Isa isa = octet::cpu::active_isa();
  state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { apply_rule(isa, rule, p, g, b); }));
}

// LAMB's pass 1 over this parameter's (or shard's) blocks: the sums of its ||p||^2 and ||u||^2
// terms, from the old state (read-only).
template <typename T>
LayerSums lamb_sums(const LambRule<T>& rule, const Tensor& param, const Tensor& grad, ParamState& state) {
  const T* p = param.data<T>();
  const T* g = grad.data<T>();
  UnitSums<2> sums;
  state.read_blocks(BlockRead<T>([&](const StateBlock<const T>& b) {
    sums.add_block(b.n, [&](int64_t i, double* t) {
      const T s[2] = {b.buffer(0)[i], b.buffer(1)[i]};
      rule.terms(p[b.begin + i], g[b.begin + i], s, t);
    });
  }));
  return sums.take();
}

template <typename T>
void lamb_update(const LambRule<T>& rule, double lr, bool trust_clip, const Tensor& param, const Tensor& grad,
                 ParamState& state) {
  const LayerSums s = lamb_sums(rule, param, grad, state);
  LambRule<T> scaled = rule;
  scaled.set_scale(static_cast<T>(lr * lamb_ratio(s[0].value(), s[1].value(), trust_clip)));
  rule_update(scaled, param, grad, state, "Lamb");
}

LayerSums lars_sums(const Tensor& param, const Tensor& grad) {
  LayerSums s;
  dispatch_float(param.dtype(), "LARS", [&]<typename T>() {
    s = {exact_squares(param.data<T>(), param.numel()),
         exact_squares(grad.data<T>(), grad.numel(), /*finite_only=*/true)};
  });
  return s;
}

template <typename T>
void lars_update(const LarsRule<T>& rule, double trust_coefficient, double weight_decay, double eps,
                 const Tensor& param, const Tensor& grad, ParamState& state) {
  const LayerSums s = lars_sums(param, grad);
  LarsRule<T> scaled = rule;
  scaled.set_scale(static_cast<T>(lars_local_lr(s[0].value(), s[1].value(), trust_coefficient, weight_decay, eps)));
  rule_update(scaled, param, grad, state, "LARS");  // pass 2: SGD momentum on the scaled gradient
}

ExactSum sum_squares(const std::vector<Tensor>& xs) {
  ExactSum sum;
  for (const Tensor& x : xs) {
    Tensor c = x.contiguous();
    dispatch_float(c.dtype(), "sum of squares",
                   [&]<typename T>() { sum.merge(exact_squares(c.data<T>(), c.numel())); });
  }
  return sum;
}

OCTET_OPTIM_INSTANTIATE_KERNELS()

}  // namespace octet::optim::cpu
