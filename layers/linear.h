// Linear: y = x w^T + b over the last dim, with PyTorch's default initialization.
//   auto fc = std::make_shared<Linear>(512, 10);   Tensor logits = (*fc)(features);  // [N,512] -> [N,10]
#pragma once

#include "layers/module.h"

namespace octet {

class Linear : public Module {
 public:
  // weight [out, in] and bias [out] from U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform, a = sqrt(5)).
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  // x [..., in] -> [..., out]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  // Resets weight and bias to the default initialization.
  void reset_parameters();

  int64_t in_features_, out_features_;
  Tensor weight_;
  Tensor bias_;  // undefined without bias
};

}  // namespace octet
