// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms") with the semantics of
// the PyTorch community implementation (lucidrains/lion-pytorch):
//   p *= 1 - lr * weight_decay                            (decoupled, as AdamW)
//   p -= lr * sign(b1 * m + (1 - b1) * g)                 (sign(0) = 0)
//   m = b2 * m + (1 - b2) * g
// Every coordinate moves by exactly lr (or 0), so Lion wants a 3-10x smaller lr and a 3-10x
// larger weight_decay than AdamW.
//   Lion opt(model.named_parameters(), LionOptions(1e-4).betas({0.9, 0.99}).weight_decay(0.1));
// State buffers: "exp_avg".
#pragma once

#include <utility>

#include "optim/optimizer.h"

namespace octet {

#define OCTET_LION_OPTIONS(X)                                                                                \
  X(double, lr, 1e-4, kNonNegative, "learning rate (peak, before the schedule)")                             \
  X(Betas, betas, (Betas{0.9, 0.99}), kUnitClosed, "coefficients of the update's and the moment's averages") \
  X(double, weight_decay, 0.0, kNonNegative, "decoupled weight decay")
struct LionOptions : OptimizerOptions {
  OCTET_OPTIMIZER_OPTIONS(LionOptions, OCTET_LION_OPTIONS)
  LionOptions() = default;
  explicit LionOptions(double lr) { lr_ = lr; }
};

class Lion : public Optimizer {
 public:
  Lion(NamedTensors params, const LionOptions& options, const StateOptions& state = {});
  Lion(std::vector<ParamGroup> groups, const LionOptions& defaults,
       const StateOptions& state = {});  // groups without options use `defaults`

  const LionOptions& options(size_t group) const;
  LionOptions& options(size_t group);

 protected:
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
};

}  // namespace octet
