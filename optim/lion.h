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

struct LionOptions : OptimizerOptions {
  double lr_;
  std::pair<double, double> betas_ = {0.9, 0.99};
  double weight_decay_ = 0.0;

  explicit LionOptions(double lr = 1e-4) : lr_(lr) {}
  LionOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  LionOptions& betas(std::pair<double, double> v) {
    betas_ = v;
    return *this;
  }
  LionOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<LionOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }
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
