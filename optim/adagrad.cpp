// Adagrad's update: the rule of optim/update_rules.h, in the parameter's type, on its device.
#include "optim/adagrad.h"

#include "optim/kernels.h"

namespace octet {
namespace {

template <typename T>
AdagradRule<T> adagrad_rule(const AdagradOptions& o, int64_t t) {
  return {.clr = static_cast<T>(o.lr_ / (1.0 + static_cast<double>(t - 1) * o.lr_decay_)),
          .wd = static_cast<T>(o.weight_decay_),
          .init = static_cast<T>(o.initial_accumulator_value_),
          .eps = static_cast<T>(o.eps_),
          .decay = o.weight_decay_ != 0.0,  // skipped at 0, so inf/nan weights stay out of g
          .first = t == 1,
          .buffers = 1};
}

}  // namespace

Adagrad::Adagrad(NamedTensors params, const AdagradOptions& options, const StateOptions& state)
    : Adagrad(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "Adagrad", state) {}

const AdagradOptions& Adagrad::options(size_t group) const {
  return static_cast<const AdagradOptions&>(group_options(group));
}
AdagradOptions& Adagrad::options(size_t group) { return static_cast<AdagradOptions&>(group_options(group)); }

std::vector<StateBuffer> Adagrad::state_buffers(const OptimizerOptions&) const { return {unsigned_buffer("sum")}; }

void Adagrad::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
                     ParamState& state) const {
  const auto& o = static_cast<const AdagradOptions&>(options);
  const int64_t t = state.step();
  dispatch_float(param.dtype(), "Adagrad",
                 [&]<typename T>() { run_rule(adagrad_rule<T>(o, t), param, grad, state, "Adagrad"); });
}

}  // namespace octet
