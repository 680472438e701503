// MobileNetV2 (Sandler et al. 2018) as torchvision builds it, with the same module names, so
// torchvision state_dicts load as they are: features.{0..18} (stem, 17 inverted residual
// blocks, 1x1 head conv), then global average pool, classifier = {Dropout, Linear}.
// The CIFAR variant (cifar = true) keeps the stem and the first stride-2 stage (c=24) at stride 1,
// so 32x32 inputs end at 4x4.
//   auto net = std::make_shared<MobileNetV2>(10, 1.0, /*cifar=*/true);   (*net)(x);  // [N,3,32,32] -> [N,10]
#pragma once

#include "layers/add.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/sequential.h"

namespace octet {

// Rounds v to the nearest multiple of `divisor` (at least `divisor`), never going below 90% of v;
// torchvision's _make_divisible.
int64_t make_divisible(double v, int64_t divisor = 8);

// conv (no bias) + BatchNorm2d + ReLU6, padding (k-1)/2: torchvision's Conv2dNormActivation.
std::shared_ptr<Sequential> conv_bn_relu6(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
                                          int64_t groups = 1);

// 1x1 expansion (skipped when expand_ratio is 1), 3x3 depthwise with `stride`, 1x1 linear
// projection; a residual connection when stride is 1 and in == out: add(conv(x), x).
class InvertedResidual : public Module {
 public:
  InvertedResidual(int64_t in, int64_t out, int64_t stride, int64_t expand_ratio);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "InvertedResidual"; }
  std::string extra_repr() const override;

  int64_t in_, out_, stride_, expand_ratio_;
  bool use_residual_;
  std::shared_ptr<Sequential> conv_;
  std::shared_ptr<Add> add_;  // null without the residual
};

class MobileNetV2 : public Module {
 public:
  // Initialized as torchvision: conv kaiming_normal (fan_out), BatchNorm 1/0, Linear N(0, 0.01)
  // with zero bias, drawn from default_generator().
  explicit MobileNetV2(int64_t num_classes = 1000, double width_mult = 1.0, bool cifar = false, int64_t in_channels = 3,
                       double dropout = 0.2);
  // x [N, in_channels, H, W] -> [N, num_classes]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MobileNetV2"; }
  std::string extra_repr() const override;

  int64_t num_classes_;
  double width_mult_;
  bool cifar_;
  int64_t last_channel_;
  std::shared_ptr<Sequential> features_;
  std::shared_ptr<Sequential> classifier_;
};

}  // namespace octet
