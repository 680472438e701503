// SmallCnn: a two-conv network for small single-channel images (Fashion-MNIST reaches ~90% in
// 2-3 epochs): [conv3x3 + BN + ReLU + maxpool2] x 2 (32, 64 channels), flatten,
// fc 128 + ReLU + dropout, fc num_classes.
//   auto net = std::make_shared<SmallCnn>(10);   (*net)(x);   // [N,1,28,28] -> [N,10]
#pragma once

#include "layers/sequential.h"

namespace octet {

class SmallCnn : public Module {
 public:
  // image_size: the input's height and width (at least 4); the first fc has
  // 64 * (image_size/4)^2 inputs. Layers keep PyTorch's default initialization.
  explicit SmallCnn(int64_t num_classes = 10, int64_t in_channels = 1, int64_t image_size = 28, double dropout = 0.25);
  // x [N, in_channels, image_size, image_size] -> [N, num_classes]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SmallCnn"; }
  std::string extra_repr() const override;

  int64_t in_channels_, image_size_;
  std::shared_ptr<Sequential> features_;
  std::shared_ptr<Sequential> classifier_;
};

}  // namespace octet
