// Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay, with the
// semantics of torch.optim.SGD:
//   d_p = g + weight_decay * p
//   buf = d_p on a parameter's first update, else momentum * buf + (1 - dampening) * d_p
//   d_p = nesterov ? d_p + momentum * buf : buf          (when momentum != 0)
//   p  -= lr * d_p
//   SGD opt(model.named_parameters(), SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(5e-4));
#pragma once

#include "optim/optimizer.h"

namespace octet {

#define OCTET_SGD_OPTIONS(X)                                                     \
  X(double, lr, 1e-3, kNonNegative, "learning rate (peak, before the schedule)") \
  X(double, momentum, 0.0, kNonNegative, "momentum factor")                      \
  X(double, dampening, 0.0, kAnyValue, "dampening of the momentum")              \
  X(bool, nesterov, false, kAnyValue, "Nesterov momentum")                       \
  X(double, weight_decay, 0.0, kNonNegative, "L2 weight decay")
struct SGDOptions : OptimizerOptions {
  OCTET_OPTIMIZER_OPTIONS(SGDOptions, OCTET_SGD_OPTIONS)
  SGDOptions() = default;
  explicit SGDOptions(double lr) { lr_ = lr; }
  // Nesterov momentum needs momentum > 0 and no dampening (as torch.optim.SGD).
  std::optional<OptionProblem> rule_problem() const;
};

class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, const SGDOptions& options, const StateOptions& state = {});
  // Groups without options use `defaults`.
  SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults, const StateOptions& state = {});

  const SGDOptions& options(size_t group) const;
  SGDOptions& options(size_t group);

 protected:
  // {"momentum_buffer"} when momentum != 0, else nothing.
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
};

}  // namespace octet
