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
template <typename Self>
struct AdamOptionsBase : OptimizerOptions {
  double lr_;
  std::pair<double, double> betas_ = {0.9, 0.999};
  double eps_ = 1e-8;
  double weight_decay_;
  bool amsgrad_ = false;

  AdamOptionsBase(double lr, double weight_decay) : lr_(lr), weight_decay_(weight_decay) {}
  Self& lr(double v) { return set(lr_, v); }
  Self& betas(std::pair<double, double> v) { return set(betas_, v); }
  Self& eps(double v) { return set(eps_, v); }
  Self& weight_decay(double v) { return set(weight_decay_, v); }
  Self& amsgrad(bool v) { return set(amsgrad_, v); }
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Self>(static_cast<const Self&>(*this));
  }
  double get_lr() const override { return lr_; }
  void set_lr(double v) override { lr_ = v; }

 private:
  template <typename F, typename V>
  Self& set(F& field, const V& v) {
    field = v;
    return static_cast<Self&>(*this);
  }
};

struct AdamOptions : AdamOptionsBase<AdamOptions> {
  explicit AdamOptions(double lr = 1e-3) : AdamOptionsBase(lr, 0.0) {}
};

struct AdamWOptions : AdamOptionsBase<AdamWOptions> {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptionsBase(lr, 1e-2) {}
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
