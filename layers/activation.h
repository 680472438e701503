// Parameter-free elementwise activations as modules, for use inside Sequential and in models, where
// the fusion pass (layers/fusion.h) can fold them into the batch norm or the add before them.
//   auto act = std::make_shared<ReLU6>();   Tensor y = (*act)(x);   // min(max(x, 0), 6)
#pragma once

#include "layers/module.h"

namespace octet {

class ReLU : public Module {
 public:
  // final: the fusion pass folds exactly this function into the module before.
  Tensor forward(const Tensor& x) final;
  std::string type_name() const override { return "ReLU"; }
  bool absorbed_ = false;  // set by the fusion pass: the module before applies it, forward passes x on
};

class ReLU6 : public Module {
 public:
  // final: the fusion pass folds exactly this function into the module before.
  Tensor forward(const Tensor& x) final;
  std::string type_name() const override { return "ReLU6"; }
  bool absorbed_ = false;  // set by the fusion pass: the module before applies it, forward passes x on
};

}  // namespace octet
