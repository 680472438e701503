// LayerNorm: normalizes over the trailing `normalized_shape` dims, then an elementwise affine
// (weight 1, bias 0 at initialization), as torch.nn.LayerNorm.
//   auto ln = std::make_shared<LayerNorm>(512);   Tensor y = (*ln)(x);   // x [..., 512]
#pragma once

#include "layers/module.h"

namespace octet {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{dim}, eps, elementwise_affine) {}
  // x [..., *normalized_shape] -> same shape
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  void reset_parameters();

  Shape normalized_shape_;
  double eps_;
  Tensor weight_, bias_;  // undefined without elementwise_affine
};

}  // namespace octet
