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

struct SGDOptions : OptimizerOptions {
  double lr_;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  bool nesterov_ = false;
  double weight_decay_ = 0.0;

  explicit SGDOptions(double lr = 1e-3) : lr_(lr) {}  // PyTorch's default lr
  SGDOptions& lr(double v) {
    lr_ = v;
    return *this;
  }
  SGDOptions& momentum(double v) {
    momentum_ = v;
    return *this;
  }
  SGDOptions& dampening(double v) {
    dampening_ = v;
    return *this;
  }
  SGDOptions& nesterov(bool v) {
    nesterov_ = v;
    return *this;
  }
  SGDOptions& weight_decay(double v) {
    weight_decay_ = v;
    return *this;
  }
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<SGDOptions>(*this); }
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }
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
