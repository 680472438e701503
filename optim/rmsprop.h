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

struct RMSpropOptions : OptimizerOptions {
  double lr_;
  double alpha_ = 0.99;
  double eps_ = 1e-8;
  double weight_decay_ = 0.0;
  double momentum_ = 0.0;
  bool centered_ = false;

  explicit RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  RMSpropOptions& lr(double v) { return set(lr_, v); }
  RMSpropOptions& alpha(double v) { return set(alpha_, v); }
  RMSpropOptions& eps(double v) { return set(eps_, v); }
  RMSpropOptions& weight_decay(double v) { return set(weight_decay_, v); }
  RMSpropOptions& momentum(double v) { return set(momentum_, v); }
  RMSpropOptions& centered(bool v) { return set(centered_, v); }
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<RMSpropOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }

 private:
  template <typename F, typename V>
  RMSpropOptions& set(F& field, const V& v) {
    field = v;
    return *this;
  }
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
