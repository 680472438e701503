// RMSprop with the semantics of torch.optim.RMSprop:
//   g += weight_decay * p                                 (L2, folded into the gradient)
//   v = alpha * v + (1 - alpha) * g * g
//   centered: g_avg = alpha * g_avg + (1 - alpha) * g;  denom = sqrt(v - g_avg^2) + eps
//   else:     denom = sqrt(v) + eps
//   momentum > 0: buf = momentum * buf + g / denom;  p -= lr * buf
//   else:         p -= lr * g / denom
//   RMSprop opt(model.named_parameters(), RMSpropOptions(1e-3).momentum(0.9).centered(true));
// State buffers: "square_avg", then "momentum_buffer" with momentum > 0, then "grad_avg" when
// centered (PyTorch's names and order).
#pragma once

#include "optim/optimizer.h"

namespace octet {

#define OCTET_RMSPROP_OPTIONS(X)                                                 \
  X(double, lr, 1e-2, kNonNegative, "learning rate (peak, before the schedule)") \
  X(double, alpha, 0.99, kUnitClosed, "smoothing constant")                      \
  X(double, eps, 1e-8, kNonNegative, "epsilon")                                  \
  X(double, weight_decay, 0.0, kNonNegative, "L2 weight decay")                  \
  X(double, momentum, 0.0, kNonNegative, "momentum factor")                      \
  X(bool, centered, false, kAnyValue, "normalize by the centered second moment")
struct RMSpropOptions : OptimizerOptions {
  OCTET_OPTIMIZER_OPTIONS(RMSpropOptions, OCTET_RMSPROP_OPTIONS)
  RMSpropOptions() = default;
  explicit RMSpropOptions(double lr) { lr_ = lr; }
};

class RMSprop : public Optimizer {
 public:
  RMSprop(NamedTensors params, const RMSpropOptions& options, const StateOptions& state = {});
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults,
          const StateOptions& state = {});  // groups without options use `defaults`

  const RMSpropOptions& options(size_t group) const;
  RMSpropOptions& options(size_t group);

 protected:
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
};

}  // namespace octet
