// LAMB's update in two passes over the state's blocks: the norms, then the scaled update. Both
// passes compute the update direction with the same rule (optim/update_rules.h), so the norm is
// exactly that of the direction applied. On CUDA both passes run on the device.
#include "optim/lamb.h"

#include <cmath>

#include "optim/layerwise.h"
#include "optim/run_rule.h"

namespace octet {
namespace {

// The per-step scalars in the parameter's type (bias corrections computed once in double); the
// step (lr * ratio) is set once the ratio is known.
template <typename T>
LambRule<T> lamb_rule(const LambOptions& o, int64_t t) {
  return {.b1 = static_cast<T>(o.betas_.first),
          .b2 = static_cast<T>(o.betas_.second),
          .one_b1 = static_cast<T>(1.0 - o.betas_.first),
          .one_b2 = static_cast<T>(1.0 - o.betas_.second),
          .bias_c1 = static_cast<T>(1.0 - std::pow(o.betas_.first, static_cast<double>(t))),
          .bias_c2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(o.betas_.second, static_cast<double>(t)))),
          .eps = static_cast<T>(o.eps_),
          .wd = static_cast<T>(o.weight_decay_),
          .decay = o.weight_decay_ != 0.0,
          .step = T(0),
          .buffers = 2};
}

// Pass 1 on the CPU: the trust ratio of this update, from the old state (read-only).
template <typename T>
double lamb_ratio_cpu(const LambOptions& o, const LambRule<T>& rule, const T* p, const T* g, ParamState& state) {
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
  return lamb_ratio(p_sq, u_sq, o.trust_clip_);
}

}  // namespace

Lamb::Lamb(NamedTensors params, const LambOptions& options, const StateOptions& state)
    : Lamb(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

Lamb::Lamb(std::vector<ParamGroup> groups, const LambOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "Lamb", state) {}

const LambOptions& Lamb::options(size_t group) const { return static_cast<const LambOptions&>(group_options(group)); }
LambOptions& Lamb::options(size_t group) { return static_cast<LambOptions&>(group_options(group)); }

std::vector<StateBuffer> Lamb::state_buffers(const OptimizerOptions&) const {
  return {signed_buffer("exp_avg"), unsigned_buffer("exp_avg_sq")};
}

void Lamb::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const LambOptions&>(options);
  OCTET_CHECK(state.buffer_names().size() == 2, "Lamb: expected 2 state buffers, got ", state.buffer_names().size());
  dispatch_float(param.dtype(), "Lamb", [&]<typename T>() {
    LambRule<T> rule = lamb_rule<T>(o, state.step());
    if (o.layer_adaptation_ && !param.device().is_cpu())
      return device_lamb_update(rule, o.lr_, o.trust_clip_, param, grad, state);
    const double r = o.layer_adaptation_ ? lamb_ratio_cpu(o, rule, param.data<T>(), grad.data<T>(), state) : 1.0;
    rule.set_scale(static_cast<T>(o.lr_ * r));
    run_rule(rule, param, grad, state, "Lamb");
  });
}

}  // namespace octet
