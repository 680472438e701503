// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76
// minutes"): Adam's moments with a layer-wise trust ratio. Per parameter tensor, at its update t:
//   m = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g * g
//   u = (m / (1 - b1^t)) / (sqrt(v) / sqrt(1 - b2^t) + eps) + weight_decay * p
//   r = ||p|| / ||u||  (L2 norms over the whole tensor; 1 when either is 0)
//   trust_clip: r = min(r, 1)
//   p -= lr * r * u
// The exact variant: bias correction always on; the ratio is applied to every tensor, also when
// weight_decay is 0 (timm's always_adapt=True) and also to biases and norm layers -- to exclude
// them, put them in a group with layer_adaptation(false) (r = 1: Adam with the decay added to
// the update) and, usually, weight_decay(0). ||p|| is used as is: phi is the identity (no clamp
// of ||p|| to [0, 10] as in some ports); trust_clip (off by default) clamps r as in timm. No
// gradient pre-normalization and no global grad-norm clipping (use clip_grad_norm before step).
//   Lamb opt(model.named_parameters(), LambOptions(1e-3).betas({0.9, 0.999}).weight_decay(0.01));
// State buffers: "exp_avg", "exp_avg_sq".
//
// Two passes over the state's blocks (see optim/cpu/layerwise.h): read_blocks() computes the new
// moments in registers, only to sum ||p||^2 and ||u||^2 in double; for_each_block() then
// recomputes the same moments from the same old state, stores them and applies r * u. So an
// 8-bit state needs nothing but read_blocks (dequantize, no re-quantization) beside its update.
#pragma once

#include <utility>

#include "optim/optimizer.h"

namespace octet {

#define OCTET_LAMB_OPTIONS(X)                                                                \
  X(double, lr, 1e-3, kNonNegative, "learning rate (peak, before the schedule)")             \
  X(Betas, betas, (Betas{0.9, 0.999}), kUnitHalfOpen, "coefficients of the moment averages") \
  X(double, eps, 1e-6, kNonNegative, "epsilon")                                              \
  X(double, weight_decay, 0.0, kNonNegative, "decoupled weight decay")                       \
  X(bool, trust_clip, false, kAnyValue, "clip the trust ratio at 1")                         \
  X(bool, layer_adaptation, true, kAnyValue, "scale by the trust ratio (false: Adam with decoupled decay)")
struct LambOptions : OptimizerOptions {
  OCTET_OPTIMIZER_OPTIONS(LambOptions, OCTET_LAMB_OPTIONS)
  LambOptions() = default;
  explicit LambOptions(double lr) { lr_ = lr; }
};

class Lamb : public Optimizer {
 public:
  Lamb(NamedTensors params, const LambOptions& options, const StateOptions& state = {});
  Lamb(std::vector<ParamGroup> groups, const LambOptions& defaults,
       const StateOptions& state = {});  // groups without options use `defaults`

  const LambOptions& options(size_t group) const;
  LambOptions& options(size_t group);

 protected:
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
  bool elementwise() const override { return false; }  // the trust ratio takes the whole parameter's norms
};

}  // namespace octet
