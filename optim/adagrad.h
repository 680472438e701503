// Adagrad with the semantics of torch.optim.Adagrad (the 8-bit optimizers paper's Table 7 also
// trains with it):
//   g += weight_decay * p                                  (L2, folded into the gradient)
//   clr = lr / (1 + (t - 1) * lr_decay)                    (t: this parameter's step, from 1)
//   sum += g * g                                           (sum starts at initial_accumulator_value)
//   p -= clr * g / (sqrt(sum) + eps)
//   Adagrad opt(model.named_parameters(), AdagradOptions(1e-2).lr_decay(1e-4), StateOptions().state_bits(8));
// State buffer: "sum" (PyTorch's name), non-negative: 8-bit state uses the unsigned map.
#pragma once

#include "optim/optimizer.h"

namespace octet {

#define OCTET_ADAGRAD_OPTIONS(X)                                                                      \
  X(double, lr, 1e-2, kNonNegative, "learning rate (peak, before the schedule)")                      \
  X(double, lr_decay, 0.0, kNonNegative, "lr / (1 + (step - 1) * lr_decay)")                          \
  X(double, weight_decay, 0.0, kNonNegative, "L2 weight decay")                                       \
  X(double, initial_accumulator_value, 0.0, kNonNegative, "the sum of squared gradients starts here") \
  X(double, eps, 1e-10, kNonNegative, "epsilon")
struct AdagradOptions : OptimizerOptions {  // PyTorch's defaults
  OCTET_OPTIMIZER_OPTIONS(AdagradOptions, OCTET_ADAGRAD_OPTIONS)
  AdagradOptions() = default;
  explicit AdagradOptions(double lr) { lr_ = lr; }
};

class Adagrad : public Optimizer {
 public:
  Adagrad(NamedTensors params, const AdagradOptions& options, const StateOptions& state = {});
  Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults,
          const StateOptions& state = {});  // groups without options use `defaults`

  const AdagradOptions& options(size_t group) const;
  AdagradOptions& options(size_t group);

 protected:
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
};

}  // namespace octet
