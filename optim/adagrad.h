// Adagrad with the semantics of torch.optim.Adagrad (the 8-bit optimizers paper's Table 7 also
// trains with it):
//   g += weight_decay * p                                  (L2, folded into the gradient)
//   clr = lr / (1 + (t - 1) * lr_decay)                    (t: this parameter's step, from 1)
//   sum += g * g                                           (sum starts at initial_accumulator_value)
//   p -= clr * g / (sqrt(sum) + eps)
//   Adagrad opt(model.named_parameters(), AdagradOptions(1e-2).lr_decay(1e-4), StateOptions().bits(8));
// State buffer: "sum" (PyTorch's name), non-negative: 8-bit state uses the unsigned map.
#pragma once

#include "optim/optimizer.h"

namespace octet {

struct AdagradOptions : OptimizerOptions {
  double lr_;
  double lr_decay_ = 0.0;
  double weight_decay_ = 0.0;
  double initial_accumulator_value_ = 0.0;
  double eps_ = 1e-10;

  explicit AdagradOptions(double lr = 1e-2) : lr_(lr) {}  // PyTorch's defaults
  AdagradOptions& lr(double v) { return set(lr_, v); }
  AdagradOptions& lr_decay(double v) { return set(lr_decay_, v); }
  AdagradOptions& weight_decay(double v) { return set(weight_decay_, v); }
  AdagradOptions& initial_accumulator_value(double v) { return set(initial_accumulator_value_, v); }
  AdagradOptions& eps(double v) { return set(eps_, v); }
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdagradOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }

 private:
  template <typename F, typename V>
  AdagradOptions& set(F& field, const V& v) {
    field = v;
    return *this;
  }
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
