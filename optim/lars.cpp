// LARS's update: the layer's local lr from the norms of p and g (pass 1, no state), then the
// SGD-momentum rule of optim/update_rules.h over each block of the state (pass 2), both on the
// parameter's device (optim::dispatch::lars_update); with sharded state the norms of each rank's
// shard are added over the ranks between the passes.
#include "optim/lars.h"

#include "optim/kernels.h"

namespace octet {
namespace {

template <typename T>
LarsRule<T> lars_rule(const LarsOptions& o, bool first) {
  return {.lr = static_cast<T>(o.lr_),
          .wd = static_cast<T>(o.weight_decay_),
          .mom = static_cast<T>(o.momentum_),
          .scale = T(1),
          .decay = o.weight_decay_ != 0.0,  // skipped at 0, so inf/nan weights stay out of d
          .momentum = o.momentum_ != 0.0,
          .first = first,
          .buffers = o.momentum_ != 0.0 ? 1 : 0};
}

}  // namespace

Lars::Lars(NamedTensors params, const LarsOptions& options, const StateOptions& state)
    : Lars(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

Lars::Lars(std::vector<ParamGroup> groups, const LarsOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "LARS", state) {}

const LarsOptions& Lars::options(size_t group) const { return static_cast<const LarsOptions&>(group_options(group)); }
LarsOptions& Lars::options(size_t group) { return static_cast<LarsOptions&>(group_options(group)); }

std::vector<StateBuffer> Lars::state_buffers(const OptimizerOptions& options) const {
  if (static_cast<const LarsOptions&>(options).momentum_ == 0.0) return {};
  return {signed_buffer("momentum_buffer")};
}

void Lars::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const LarsOptions&>(options);
  const bool first = state.step() == 1;
  dispatch_float(param.dtype(), "LARS", [&]<typename T>() {
    LarsRule<T> rule = lars_rule<T>(o, first);
    if (!o.layer_adaptation_) return run_rule(rule, param, grad, state, "LARS");
    check_rule_state(rule, state, "LARS");
    if (!sharded())
      return optim::dispatch::lars_update(rule, o.trust_coefficient_, o.weight_decay_, o.eps_, param, grad, state);
    LayerSums sums = optim::dispatch::lars_sums(param, grad);  // this rank's shard, then every rank's
    sum_over_shards(sums);
    rule.set_scale(
        static_cast<T>(lars_local_lr(sums[0].value(), sums[1].value(), o.trust_coefficient_, o.weight_decay_, o.eps_)));
    run_rule(rule, param, grad, state, "LARS");
  });
}

}  // namespace octet
