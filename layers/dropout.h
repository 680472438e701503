// Dropout: while training, zeroes each element with probability p and scales the rest by
// 1/(1-p), drawing from default_generator(); the identity in evaluation mode.
//   auto drop = std::make_shared<Dropout>(0.2);   drop->eval();   (*drop)(x);   // == x
#pragma once

#include "layers/module.h"

namespace octet {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;

  double p_;
};

}  // namespace octet
