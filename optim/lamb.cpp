// LAMB's update in two passes over the state's blocks (optim::dispatch::lamb_update): the norms,
// then the scaled update; with sharded state the norms of each rank's shard are added over the
// ranks between the passes. Both passes compute the update direction with the same rule
// (optim/update_rules.h), so the norm is exactly that of the direction applied.
#include "optim/lamb.h"

#include <cmath>

#include "optim/kernels.h"

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
    if (!o.layer_adaptation_) {
      rule.set_scale(static_cast<T>(o.lr_));
      return run_rule(rule, param, grad, state, "Lamb");
    }
    check_rule_state(rule, state, "Lamb");
    if (!sharded()) return optim::dispatch::lamb_update(rule, o.lr_, o.trust_clip_, param, grad, state);
    // This rank's shard: its sums, added over the ranks into the whole parameter's.
    LayerSums sums = optim::dispatch::lamb_sums(rule, param, grad, state);
    sum_over_shards(sums);
    rule.set_scale(static_cast<T>(o.lr_ * lamb_ratio(sums[0].value(), sums[1].value(), o.trust_clip_)));
    run_rule(rule, param, grad, state, "Lamb");
  });
}

}  // namespace octet
