// Modules that only pass a tensor on or change its shape.
//   auto flat = std::make_shared<Flatten>();   Tensor v = (*flat)(x);   // [N,C,H,W] -> [N,C*H*W]
#pragma once

#include "layers/module.h"

namespace octet {

// Returns its input (a placeholder, e.g. for an absent shortcut projection).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  std::string type_name() const override { return "Identity"; }
};

// Flattens dims start_dim..end_dim into one.
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;

  int64_t start_dim_, end_dim_;
};

}  // namespace octet
