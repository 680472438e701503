// Parameter-free elementwise activations as modules, for use inside Sequential.
//   auto act = std::make_shared<ReLU6>();   Tensor y = (*act)(x);   // min(max(x, 0), 6)
#pragma once

#include "layers/module.h"

namespace octet {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

class ReLU6 : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU6"; }
};

}  // namespace octet
