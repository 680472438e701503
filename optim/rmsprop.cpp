// RMSprop's update: the rule of optim/update_rules.h, in the parameter's type, on its device.
#include "optim/rmsprop.h"

#include "optim/kernels.h"

namespace octet {
namespace {

template <typename T>
RmspropRule<T> rmsprop_rule(const RMSpropOptions& o) {
  const bool momentum = o.momentum_ > 0.0;
  return {.lr = static_cast<T>(o.lr_),
          .alpha = static_cast<T>(o.alpha_),
          .one_alpha = static_cast<T>(1.0 - o.alpha_),
          .eps = static_cast<T>(o.eps_),
          .wd = static_cast<T>(o.weight_decay_),
          .mom = static_cast<T>(o.momentum_),
          .decay = o.weight_decay_ != 0.0,  // skipped at 0, so inf/nan weights stay out of g
          .momentum = momentum,
          .centered = o.centered_,
          .buffers = 1 + (momentum ? 1 : 0) + (o.centered_ ? 1 : 0)};
}

}  // namespace

RMSprop::RMSprop(NamedTensors params, const RMSpropOptions& options, const StateOptions& state)
    : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "RMSprop", state) {}

const RMSpropOptions& RMSprop::options(size_t group) const {
  return static_cast<const RMSpropOptions&>(group_options(group));
}
RMSpropOptions& RMSprop::options(size_t group) { return static_cast<RMSpropOptions&>(group_options(group)); }

std::vector<StateBuffer> RMSprop::state_buffers(const OptimizerOptions& options) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  // square_avg is never negative, but signed at 8 bits as in the reference: bitsandbytes stores it
  // with the signed map of its one-state optimizers. 4-bit state treats it as the second moment it is.
  std::vector<StateBuffer> buffers = {StateBuffer{"square_avg", /*is_signed=*/true, /*nonnegative=*/true}};
  if (o.momentum_ > 0.0) buffers.push_back(signed_buffer("momentum_buffer"));
  if (o.centered_) buffers.push_back(signed_buffer("grad_avg"));
  return buffers;
}

void RMSprop::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
                     ParamState& state) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  dispatch_float(param.dtype(), "RMSprop",
                 [&]<typename T>() { run_rule(rmsprop_rule<T>(o), param, grad, state, "RMSprop"); });
}

}  // namespace octet
