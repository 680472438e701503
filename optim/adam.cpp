// Adam's and AdamW's update: the rule of optim/update_rules.h in the parameter's type, on its
// device; the per-step scalars (bias corrections) are computed once in double.
#include "optim/adam.h"

#include <cmath>

#include "optim/kernels.h"

namespace octet {
namespace {

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, decoupled;
};

template <typename O>
AdamStep adam_step(const O& o, bool decoupled) {
  return {o.lr_, o.betas_.first, o.betas_.second, o.eps_, o.weight_decay_, o.amsgrad_, decoupled};
}

std::vector<StateBuffer> buffers(bool amsgrad) {
  if (amsgrad) return {signed_buffer("exp_avg"), unsigned_buffer("exp_avg_sq"), unsigned_buffer("max_exp_avg_sq")};
  return {signed_buffer("exp_avg"), unsigned_buffer("exp_avg_sq")};
}

template <typename T>
AdamRule<T> adam_rule(const AdamStep& s, int64_t t) {
  const double bias_c1 = 1.0 - std::pow(s.beta1, static_cast<double>(t));
  const double bias_c2 = 1.0 - std::pow(s.beta2, static_cast<double>(t));
  return {.step_size = static_cast<T>(s.lr / bias_c1),
          .bias_c2_sqrt = static_cast<T>(std::sqrt(bias_c2)),
          .b1 = static_cast<T>(s.beta1),
          .b2 = static_cast<T>(s.beta2),
          .one_b1 = static_cast<T>(1.0 - s.beta1),
          .one_b2 = static_cast<T>(1.0 - s.beta2),
          .eps = static_cast<T>(s.eps),
          .wd = static_cast<T>(s.weight_decay),
          .shrink = static_cast<T>(1.0 - s.lr * s.weight_decay),
          .l2 = !s.decoupled && s.weight_decay != 0.0,
          .decay = s.decoupled && s.weight_decay != 0.0,
          .amsgrad = s.amsgrad,
          .buffers = s.amsgrad ? 3 : 2};
}

void adam_update(const AdamStep& s, const Tensor& param, const Tensor& grad, ParamState& state, const char* name) {
  const int64_t t = state.step();
  dispatch_float(param.dtype(), name, [&]<typename T>() { run_rule(adam_rule<T>(s, t), param, grad, state, name); });
}

}  // namespace

// ---- Adam

Adam::Adam(NamedTensors params, const AdamOptions& options, const StateOptions& state)
    : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "Adam", state) {}

const AdamOptions& Adam::options(size_t group) const { return static_cast<const AdamOptions&>(group_options(group)); }
AdamOptions& Adam::options(size_t group) { return static_cast<AdamOptions&>(group_options(group)); }

std::vector<StateBuffer> Adam::state_buffers(const OptimizerOptions& options) const {
  return buffers(static_cast<const AdamOptions&>(options).amsgrad_);
}

void Adam::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  adam_update(adam_step(static_cast<const AdamOptions&>(options), false), param, grad, state, "Adam");
}

// ---- AdamW

AdamW::AdamW(NamedTensors params, const AdamWOptions& options, const StateOptions& state)
    : AdamW(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "AdamW", state) {}

const AdamWOptions& AdamW::options(size_t group) const {
  return static_cast<const AdamWOptions&>(group_options(group));
}
AdamWOptions& AdamW::options(size_t group) { return static_cast<AdamWOptions&>(group_options(group)); }

std::vector<StateBuffer> AdamW::state_buffers(const OptimizerOptions& options) const {
  return buffers(static_cast<const AdamWOptions&>(options).amsgrad_);
}

void AdamW::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  adam_update(adam_step(static_cast<const AdamWOptions&>(options), true), param, grad, state, "AdamW");
}

}  // namespace octet
