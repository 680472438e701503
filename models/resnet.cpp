#include "models/resnet.h"

#include "core/ops/elementwise.h"
#include "core/ops/nn.h"
#include "core/ops/pool.h"
#include "layers/init.h"
#include "layers/pooling.h"

namespace octet {

namespace {

std::shared_ptr<Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<Conv2d>(in, out, 3, Conv2dOptions().stride(stride).padding(1), /*bias=*/false);
}

std::shared_ptr<Conv2d> conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<Conv2d>(in, out, 1, Conv2dOptions().stride(stride), /*bias=*/false);
}

std::shared_ptr<Sequential> projection(int64_t in, int64_t out, int64_t stride) {
  auto seq = std::make_shared<Sequential>();
  seq->push_back(conv1x1(in, out, stride));
  seq->push_back(std::make_shared<BatchNorm2d>(out));
  return seq;
}

// Option A shortcut: x [N, C, H, W] -> [N, out, ceil(H/stride), ceil(W/stride)], the input
// channels in the middle and zeros on both sides.
Tensor pad_shortcut(const Tensor& x, int64_t out, int64_t stride) {
  Tensor s = stride == 1 ? x : x.slice(2, 0, x.size(2), stride).slice(3, 0, x.size(3), stride);
  int64_t extra = out - x.size(1), front = extra / 2, back = extra - front;
  if (extra == 0) return s;
  TensorOptions opts = TensorOptions(s.dtype()).device(s.device());
  std::vector<Tensor> parts;
  if (front > 0) parts.push_back(zeros({s.size(0), front, s.size(2), s.size(3)}, opts));
  parts.push_back(s);
  if (back > 0) parts.push_back(zeros({s.size(0), back, s.size(2), s.size(3)}, opts));
  return cat(parts, 1);
}

void init_torchvision_resnet(Module& net) {
  net.apply([](Module& m) {
    if (auto* conv = dynamic_cast<Conv2d*>(&m)) {
      init::kaiming_normal_(conv->weight_, 0.0, init::FanMode::fan_out, init::Nonlinearity::relu);
    } else if (auto* bn = dynamic_cast<BatchNorm2d*>(&m)) {
      bn->reset_parameters();
    }
  });
}

}  // namespace

// ---------------------------------------------------------------- blocks

BasicBlock::BasicBlock(int64_t in, int64_t planes, int64_t stride, Shortcut shortcut)
    : in_(in), out_(planes), stride_(stride), shortcut_(shortcut) {
  OCTET_CHECK(shortcut == Shortcut::B || planes >= in, "BasicBlock: shortcut A cannot reduce channels from ", in,
              " to ", planes);
  conv1_ = register_module("conv1", conv3x3(in, planes, stride));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  relu1_ = register_module("relu1", std::make_shared<ReLU>());
  conv2_ = register_module("conv2", conv3x3(planes, planes));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  add_ = register_module("add", std::make_shared<Add>());
  relu2_ = register_module("relu2", std::make_shared<ReLU>());
  if ((stride != 1 || in != planes) && shortcut == Shortcut::B)
    downsample_ = register_module("downsample", projection(in, planes, stride));
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor y = bn2_->forward(conv2_->forward(relu1_->forward(bn1_->forward(conv1_->forward(x)))));
  return relu2_->forward(add_->forward(y, shortcut(x)));
}

Tensor BasicBlock::shortcut(const Tensor& x) {
  if (downsample_) return downsample_->forward(x);
  if (stride_ != 1 || in_ != out_) return pad_shortcut(x, out_, stride_);
  return x;
}

Bottleneck::Bottleneck(int64_t in, int64_t planes, int64_t stride) {
  int64_t out = planes * kExpansion;
  conv1_ = register_module("conv1", conv1x1(in, planes));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  relu1_ = register_module("relu1", std::make_shared<ReLU>());
  conv2_ = register_module("conv2", conv3x3(planes, planes, stride));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  relu2_ = register_module("relu2", std::make_shared<ReLU>());
  conv3_ = register_module("conv3", conv1x1(planes, out));
  bn3_ = register_module("bn3", std::make_shared<BatchNorm2d>(out));
  add_ = register_module("add", std::make_shared<Add>());
  relu3_ = register_module("relu3", std::make_shared<ReLU>());
  if (stride != 1 || in != out) downsample_ = register_module("downsample", projection(in, out, stride));
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor y = relu1_->forward(bn1_->forward(conv1_->forward(x)));
  y = bn3_->forward(conv3_->forward(relu2_->forward(bn2_->forward(conv2_->forward(y)))));
  return relu3_->forward(add_->forward(y, downsample_ ? downsample_->forward(x) : x));
}

// ---------------------------------------------------------------- ImageNet ResNet

ResNet::ResNet(Block block, const std::vector<int64_t>& layers, int64_t num_classes, int64_t in_channels) {
  OCTET_CHECK(layers.size() == 4, "ResNet: expected 4 stage sizes, got ", layers.size());
  OCTET_CHECK(num_classes > 0 && in_channels > 0, "ResNet: expected positive num_classes and in_channels, got ",
              num_classes, " and ", in_channels);
  conv1_ = register_module(
      "conv1", std::make_shared<Conv2d>(in_channels, 64, 7, Conv2dOptions().stride(2).padding(3), /*bias=*/false));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(64));
  relu_ = register_module("relu", std::make_shared<ReLU>());
  maxpool_ = register_module("maxpool", std::make_shared<MaxPool2d>(3, 2, 1));
  int64_t in = 64;
  const int64_t expansion = block == Block::basic ? BasicBlock::kExpansion : Bottleneck::kExpansion;
  for (size_t s = 0; s < 4; ++s) {
    OCTET_CHECK(layers[s] > 0, "ResNet: expected positive stage sizes, got ", layers[s], " for layer", s + 1);
    int64_t planes = int64_t{64} << s;
    auto stage = register_module("layer" + std::to_string(s + 1), std::make_shared<Sequential>());
    for (int64_t i = 0; i < layers[s]; ++i) {
      int64_t stride = (i == 0 && s > 0) ? 2 : 1;
      if (block == Block::basic)
        stage->push_back(std::make_shared<BasicBlock>(in, planes, stride, Shortcut::B));
      else
        stage->push_back(std::make_shared<Bottleneck>(in, planes, stride));
      in = planes * expansion;
    }
    stages_.push_back(stage);
  }
  fc_ = register_module("fc", std::make_shared<Linear>(in, num_classes));
  init_torchvision_resnet(*this);
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor y = maxpool_->forward(relu_->forward(bn1_->forward(conv1_->forward(x))));
  for (const auto& stage : stages_) y = stage->forward(y);
  return fc_->forward(adaptive_avg_pool2d(y, {1, 1}).flatten(1));
}

// ---------------------------------------------------------------- CIFAR ResNet

CifarResNet::CifarResNet(int64_t depth, int64_t num_classes, Shortcut shortcut, int64_t in_channels)
    : depth_(depth), shortcut_(shortcut) {
  OCTET_CHECK(depth >= 8 && (depth - 2) % 6 == 0, "CifarResNet: expected depth 6n+2 (20, 32, 44, 56, 110), got ",
              depth);
  OCTET_CHECK(num_classes > 0 && in_channels > 0, "CifarResNet: expected positive num_classes and in_channels, got ",
              num_classes, " and ", in_channels);
  int64_t n = (depth - 2) / 6;
  conv1_ = register_module("conv1", conv3x3(in_channels, 16));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(16));
  relu_ = register_module("relu", std::make_shared<ReLU>());
  int64_t in = 16;
  for (int64_t s = 0; s < 3; ++s) {
    int64_t planes = int64_t{16} << s;
    auto stage = register_module("layer" + std::to_string(s + 1), std::make_shared<Sequential>());
    for (int64_t i = 0; i < n; ++i) {
      stage->push_back(std::make_shared<BasicBlock>(in, planes, (i == 0 && s > 0) ? 2 : 1, shortcut));
      in = planes;
    }
    stages_.push_back(stage);
  }
  fc_ = register_module("fc", std::make_shared<Linear>(in, num_classes));
  apply([](Module& m) {
    if (auto* conv = dynamic_cast<Conv2d*>(&m)) init::kaiming_normal_(conv->weight_);
    if (auto* fc = dynamic_cast<Linear*>(&m)) init::kaiming_normal_(fc->weight_);
  });
}

Tensor CifarResNet::forward(const Tensor& x) {
  Tensor y = relu_->forward(bn1_->forward(conv1_->forward(x)));
  for (const auto& stage : stages_) y = stage->forward(y);
  return fc_->forward(adaptive_avg_pool2d(y, {1, 1}).flatten(1));
}

std::string CifarResNet::extra_repr() const {
  return detail::str_cat("depth=", depth_, ", shortcut=", shortcut_ == Shortcut::A ? "A" : "B");
}

}  // namespace octet
