// LARS (You et al. 2017, "Large Batch Training of Convolutional Networks"): SGD with momentum
// and a layer-wise learning rate, as commonly implemented (timm's Lars, NVIDIA's examples).
// Per parameter tensor, at its update t:
//   local_lr = trust_coefficient * ||p|| / (||g|| + weight_decay * ||p|| + eps)
//              (L2 norms over the whole tensor; 1 when ||p|| or ||g|| is 0)
//   d = (g + weight_decay * p) * local_lr
//   buf = d at t = 1, else momentum * buf + d          (no buffer when momentum is 0: buf = d)
//   p -= lr * buf
// The exact variant: the ratio is applied to every tensor, also when weight_decay is 0 (timm's
// always_adapt=True), and it is not clipped (no LARC trust_clip); no dampening, no Nesterov.
// Biases and norm layers are NOT excluded by default: to exclude them (as SimCLR/BYOL recipes
// do), put them in a group with layer_adaptation(false) (local_lr = 1: plain SGD momentum with
// L2 decay) and, usually, weight_decay(0).
//   Lars opt(model.named_parameters(), LarsOptions(0.1).momentum(0.9).weight_decay(1e-6));
// State buffers: "momentum_buffer" when momentum != 0.
//
// Two passes: the norms of p and g (no state involved: they are dense tensors), then the SGD
// update over the state's blocks; an 8-bit momentum state needs nothing beyond for_each_block.
#pragma once

#include "optim/optimizer.h"

namespace octet {

#define OCTET_LARS_OPTIONS(X)                                                   \
  X(double, lr, 1.0, kNonNegative, "learning rate (peak, before the schedule)") \
  X(double, momentum, 0.9, kNonNegative, "momentum factor")                     \
  X(double, weight_decay, 0.0, kNonNegative, "L2 weight decay")                 \
  X(double, trust_coefficient, 0.001, kPositive, "trust coefficient")           \
  X(double, eps, 1e-8, kNonNegative, "epsilon")                                 \
  X(bool, layer_adaptation, true, kAnyValue, "scale by the trust ratio (false: SGD with momentum)")
struct LarsOptions : OptimizerOptions {
  OCTET_OPTIMIZER_OPTIONS(LarsOptions, OCTET_LARS_OPTIONS)
  LarsOptions() = default;
  explicit LarsOptions(double lr) { lr_ = lr; }
};

class Lars : public Optimizer {
 public:
  Lars(NamedTensors params, const LarsOptions& options, const StateOptions& state = {});
  Lars(std::vector<ParamGroup> groups, const LarsOptions& defaults,
       const StateOptions& state = {});  // groups without options use `defaults`

  const LarsOptions& options(size_t group) const;
  LarsOptions& options(size_t group);

 protected:
  // {"momentum_buffer"} when momentum != 0, else nothing.
  std::vector<StateBuffer> state_buffers(const OptimizerOptions& options) const override;
  void update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
              ParamState& state) const override;
  bool elementwise() const override { return false; }  // the trust ratio takes the whole parameter's norms
};

// The spellings before octet's naming rule (README, "Names"); kept so existing code builds.
using LARS = Lars;
using LARSOptions = LarsOptions;

}  // namespace octet
