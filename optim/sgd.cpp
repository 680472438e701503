// SGD's update: the rule of optim/update_rules.h, in the parameter's type, on its device.
#include "optim/sgd.h"

#include "optim/kernels.h"

namespace octet {

std::optional<OptionProblem> SGDOptions::rule_problem() const {
  if (!nesterov_ || (momentum_ > 0.0 && dampening_ == 0.0)) return std::nullopt;
  return OptionProblem{"nesterov", detail::str_cat("true needs momentum > 0 and dampening 0, got momentum ", momentum_,
                                                   " and dampening ", dampening_)};
}

namespace {

template <typename T>
SgdRule<T> sgd_rule(const SGDOptions& o, bool first) {
  return {.lr = static_cast<T>(o.lr_),
          .wd = static_cast<T>(o.weight_decay_),
          .mom = static_cast<T>(o.momentum_),
          .keep = static_cast<T>(1.0 - o.dampening_),
          .decay = o.weight_decay_ != 0.0,
          .momentum = o.momentum_ != 0.0,
          .nesterov = o.nesterov_,
          .first = first,
          .buffers = o.momentum_ != 0.0 ? 1 : 0};
}

}  // namespace

SGD::SGD(NamedTensors params, const SGDOptions& options, const StateOptions& state)
    : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "SGD", state) {}

const SGDOptions& SGD::options(size_t group) const { return static_cast<const SGDOptions&>(group_options(group)); }
SGDOptions& SGD::options(size_t group) { return static_cast<SGDOptions&>(group_options(group)); }

std::vector<StateBuffer> SGD::state_buffers(const OptimizerOptions& options) const {
  if (static_cast<const SGDOptions&>(options).momentum_ == 0.0) return {};
  return {signed_buffer("momentum_buffer")};
}

void SGD::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const SGDOptions&>(options);
  bool first = state.step() == 1;
  dispatch_float(param.dtype(), "SGD",
                 [&]<typename T>() { run_rule(sgd_rule<T>(o, first), param, grad, state, "SGD"); });
}

}  // namespace octet
