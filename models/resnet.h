// ResNets (He et al. 2016). ImageNet variants as torchvision builds them (v1.5: a Bottleneck
// strides on its 3x3 conv), with the same module names so torchvision state_dicts load:
// conv1 7x7/2, bn1, maxpool 3x3/2, layer1..layer4, global average pool, fc.
// CIFAR variants (depth 6n+2) as in the paper's CIFAR-10 section: 3x3 stem with 16 channels,
// stages of 16/32/64 channels, global average pool, fc; the shortcut across a shape change is
// option "A" (stride-2 subsampling + zero channels, no parameters) or "B" (1x1 conv + BN).
//   auto r50 = std::make_shared<ResNet>(ResNet::Block::bottleneck, std::vector<int64_t>{3, 4, 6, 3});
//   auto r20 = std::make_shared<CifarResNet>(20, 10, Shortcut::A);
#pragma once

#include <vector>

#include "layers/activation.h"
#include "layers/add.h"
#include "layers/batch_norm.h"
#include "layers/conv.h"
#include "layers/linear.h"
#include "layers/sequential.h"

namespace octet {

// How a residual block's input is brought to the output shape when they differ.
enum class Shortcut {
  A,  // zero-padding identity: subsample spatially with the stride, pad channels with zeros
  B,  // projection: 1x1 conv with the stride + BatchNorm2d
};

// Two 3x3 convs (expansion 1): relu2(add(bn2(conv2(relu1(bn1(conv1(x))))), shortcut(x))).
class BasicBlock : public Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in, int64_t planes, int64_t stride = 1, Shortcut shortcut = Shortcut::B);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BasicBlock"; }

  int64_t in_, out_, stride_;
  Shortcut shortcut_;
  std::shared_ptr<Conv2d> conv1_, conv2_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_;
  std::shared_ptr<ReLU> relu1_, relu2_;
  std::shared_ptr<Add> add_;
  std::shared_ptr<Sequential> downsample_;  // null: identity or option A

 private:
  Tensor shortcut(const Tensor& x);
};

// 1x1 reduce, 3x3 with the stride, 1x1 expand to planes * 4; projection shortcut (option B):
// relu3(add(bn3(conv3(relu2(bn2(conv2(relu1(bn1(conv1(x))))))), downsample(x))).
class Bottleneck : public Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in, int64_t planes, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Bottleneck"; }

  std::shared_ptr<Conv2d> conv1_, conv2_, conv3_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, bn3_;
  std::shared_ptr<ReLU> relu1_, relu2_, relu3_;
  std::shared_ptr<Add> add_;
  std::shared_ptr<Sequential> downsample_;  // null: identity
};

// ImageNet ResNet: resnet18 = (basic, {2,2,2,2}), resnet34 = (basic, {3,4,6,3}),
// resnet50 = (bottleneck, {3,4,6,3}). Initialized as torchvision: conv kaiming_normal
// (fan_out, relu), BatchNorm 1/0, fc PyTorch's default.
class ResNet : public Module {
 public:
  enum class Block { basic, bottleneck };
  ResNet(Block block, const std::vector<int64_t>& layers, int64_t num_classes = 1000, int64_t in_channels = 3);
  // x [N, in_channels, H, W] -> [N, num_classes]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ResNet"; }

  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<ReLU> relu_;
  std::shared_ptr<Module> maxpool_;
  std::vector<std::shared_ptr<Sequential>> stages_;  // layer1..layer4
  std::shared_ptr<Linear> fc_;
};

// CIFAR ResNet of depth 6n+2 (20, 32, 44, 56, 110, ...). Initialized as the common reference
// implementation (akamaster/pytorch_resnet_cifar10): conv and fc weights kaiming_normal
// (fan_in), BatchNorm 1/0, fc bias PyTorch's default.
class CifarResNet : public Module {
 public:
  CifarResNet(int64_t depth, int64_t num_classes = 10, Shortcut shortcut = Shortcut::A, int64_t in_channels = 3);
  // x [N, in_channels, H, W] -> [N, num_classes]
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "CifarResNet"; }
  std::string extra_repr() const override;

  int64_t depth_;
  Shortcut shortcut_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<ReLU> relu_;
  std::vector<std::shared_ptr<Sequential>> stages_;  // layer1..layer3
  std::shared_ptr<Linear> fc_;
};

}  // namespace octet
