// 2-D pooling modules over [N,C,H,W] inputs with square windows (PyTorch semantics: floor
// output size, padding at most half the kernel). A stride of 0 means "equal to the kernel".
//   auto pool = std::make_shared<MaxPool2d>(3, 2, 1);        // ResNet stem: 3x3, stride 2, pad 1
//   auto gap = std::make_shared<AdaptiveAvgPool2d>(1);       // global average pool -> [N,C,1,1]
#pragma once

#include "layers/module.h"

namespace octet {

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;

  int64_t kernel_size_, stride_, padding_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0, bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;

  int64_t kernel_size_, stride_, padding_;
  bool count_include_pad_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(int64_t output_size) : AdaptiveAvgPool2d(output_size, output_size) {}
  AdaptiveAvgPool2d(int64_t output_h, int64_t output_w);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;

  int64_t output_h_, output_w_;
};

}  // namespace octet
