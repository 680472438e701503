// Adam and AdamW with the semantics of torch.optim.Adam / AdamW (t = the parameter's update count):
//   Adam:  g += weight_decay * p                         (L2, folded into the gradient)
//   AdamW: p *= 1 - lr * weight_decay                     (decoupled, before the Adam update)
//   m = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g * g;   amsgrad: v_max = max(v_max, v)
//   p -= lr / (1 - b1^t) * m / (sqrt(v or v_max) / sqrt(1 - b2^t) + eps)
//   Adam opt(model.named_parameters(), AdamOptions(3e-4).betas({0.9, 0.95}).amsgrad(true));
//   AdamW opt(model.named_parameters(), AdamWOptions(1e-3).weight_decay(0.05));
// State buffers: "exp_avg", "exp_avg_sq", and "max_exp_avg_sq" with amsgrad.
#pragma once

#include <utility>

#include "optim/optimizer.h"

namespace octet {

// Adam's and AdamW's options differ only in the default weight decay (and what it means).
#define OCTET_ADAM_LIKE_OPTIONS(X, decay, decay_doc)                                         \
  X(double, lr, 1e-3, kNonNegative, "learning rate (peak, before the schedule)")             \
  X(Betas, betas, (Betas{0.9, 0.999}), kUnitHalfOpen, "coefficients of the moment averages") \
  X(double, eps, 1e-8, kNonNegative, "epsilon")                                              \
  X(double, weight_decay, decay, kNonNegative, decay_doc)                                    \
  X(bool, amsgrad, false, kAnyValue, "AMSGrad variant")
#define OCTET_ADAM_OPTIONS(X) OCTET_ADAM_LIKE_OPTIONS(X, 0.0, "L2 weight decay")
#define OCTET_ADAMW_OPTIONS(X) OCTET_ADAM_LIKE_OPTIONS(X, 1e-2, "decoupled weight decay")
struct AdamOptions : OptimizerOptions {
  OCTET_OPTIMIZER_OPTIONS(AdamOptions, OCTET_ADAM_OPTIONS)
  AdamOptions() = default;
  explicit AdamOptions(double lr) { lr_ = lr; }
};

struct AdamWOptions : OptimizerOptions {
  OCTET_OPTIMIZER_OPTIONS(AdamWOptions, OCTET_ADAMW_OPTIONS)
  AdamWOptions() = default;
  explicit AdamWOptions(double lr) { lr_ = lr; }
};

class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, const AdamOptions& options, const StateOptions& state = {});
  Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults,
       const StateOptions& state = {});  // groups without options use `defaults`

  const AdamOptions& options(size_t group) const;
  AdamOptions& options(size_t group);

 protected:
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
};

class AdamW : public Optimizer {
 public:
  AdamW(NamedTensors params, const AdamWOptions& options, const StateOptions& state = {});
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& defaults, const StateOptions& state = {});

  const AdamWOptions& options(size_t group) const;
  AdamWOptions& options(size_t group);

 protected:
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
};

}  // namespace octet
