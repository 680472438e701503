// Lion's update: the rule of optim/update_rules.h, in the parameter's type, on its device.
#include "optim/lion.h"

#include "optim/kernels.h"

namespace octet {
namespace {

template <typename T>
LionRule<T> lion_rule(const LionOptions& o) {
  return {.lr = static_cast<T>(o.lr_),
          .shrink = static_cast<T>(1.0 - o.lr_ * o.weight_decay_),
          .b1 = static_cast<T>(o.betas_.first),
          .one_b1 = static_cast<T>(1.0 - o.betas_.first),
          .b2 = static_cast<T>(o.betas_.second),
          .one_b2 = static_cast<T>(1.0 - o.betas_.second),
          .decay = o.weight_decay_ != 0.0,
          .buffers = 1};
}

}  // namespace

Lion::Lion(NamedTensors params, const LionOptions& options, const StateOptions& state)
    : Lion(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

Lion::Lion(std::vector<ParamGroup> groups, const LionOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "Lion", state) {}

const LionOptions& Lion::options(size_t group) const { return static_cast<const LionOptions&>(group_options(group)); }
LionOptions& Lion::options(size_t group) { return static_cast<LionOptions&>(group_options(group)); }

std::vector<StateBuffer> Lion::state_buffers(const OptimizerOptions&) const { return {signed_buffer("exp_avg")}; }

void Lion::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const LionOptions&>(options);
  dispatch_float(param.dtype(), "Lion", [&]<typename T>() { run_rule(lion_rule<T>(o), param, grad, state, "Lion"); });
}

}  // namespace octet
