// Conv2d: 2-D convolution over NCHW inputs with a square kernel, PyTorch's default initialization.
//   auto conv = std::make_shared<Conv2d>(3, 16, 3, Conv2dOptions().padding(1), /*bias=*/false);
//   Tensor y = (*conv)(x);   // [N,3,H,W] -> [N,16,H,W]
#pragma once

#include "core/ops/conv.h"
#include "layers/module.h"

namespace octet {

class Conv2d : public Module {
 public:
  // weight [out, in/groups, k, k] and bias [out] from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
  // fan_in = in/groups * k * k (kaiming_uniform, a = sqrt(5)).
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& opts = {},
         bool bias = true);
  // x [N, in, H, W] -> [N, out, P, Q]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  void reset_parameters();

  int64_t in_channels_, out_channels_, kernel_size_;
  Conv2dOptions options_;
  Tensor weight_;
  Tensor bias_;  // undefined without bias
};

}  // namespace octet
