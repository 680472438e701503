// Conv2d: 2-D convolution over NCHW inputs with a square kernel, PyTorch's default initialization.
// Optionally INT8-trained (Unified INT8, quant/int8_conv.h): input and weight quantized to int8 in
// the forward pass, the output gradient in the backward pass; the layer's Int8Layer holds the
// config and the stats the autograd nodes update (quant/int8_model.h converts a whole model).
//   auto conv = std::make_shared<Conv2d>(3, 16, 3, Conv2dOptions().padding(1), /*bias=*/false);
//   Tensor y = (*conv)(x);   // [N,3,H,W] -> [N,16,H,W]
//   conv->set_int8(std::make_shared<quant::Int8Layer>());   // from now on INT8
#pragma once

#include <memory>

#include "core/ops/conv.h"
#include "layers/batch_norm.h"
#include "layers/module.h"
#include "quant/int8.h"

namespace octet {

class Conv2d : public Module {
 public:
  // weight [out, in/groups, k, k] and bias [out] from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
  // fan_in = in/groups * k * k (kaiming_uniform, a = sqrt(5)).
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& opts = {},
         bool bias = true);
  // x [N, in, H, W] -> [N, out, P, Q]
  Tensor forward(const Tensor& x) override;
  // forward(bn.forward(z, act)): an INT8 layer after a batch norm in training mode runs both as one
  // op (quant::int8_conv2d_batch_norm: the batch norm writes this layer's int8 codes, the float
  // activation is never written; the same bits) unless quant::set_int8_bn_fusion turned that off.
  // Sequential and the ResNet blocks call it where a BatchNorm2d -> ReLU/ReLU6 feeds a Conv2d.
  Tensor forward_after(BatchNorm2d& bn, NormActivation act, const Tensor& z);
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  void reset_parameters();

  // INT8 mode: forward and backward through quant::int8_conv2d with this layer state (shared with
  // the autograd nodes, which update its stats); nullptr returns to float convolution.
  void set_int8(std::shared_ptr<quant::Int8Layer> layer) { int8_ = std::move(layer); }
  const std::shared_ptr<quant::Int8Layer>& int8() const { return int8_; }

  int64_t in_channels_, out_channels_, kernel_size_;
  Conv2dOptions options_;
  Tensor weight_;
  Tensor bias_;  // undefined without bias

 private:
  std::shared_ptr<quant::Int8Layer> int8_;  // null: float
};

// The input a convolutional network `net` runs fastest on: x made channels-last where
// channels_last_pays(x) (core/memory_format.h: on the CPU in f32, through oneDNN) and, in the
// automatic mode, the network is one that measured faster channels-last (`automatic`) with no INT8
// Conv2d (the INT8 kernels take NCHW); x itself otherwise. The convolutions, batch norms, adds and
// max pools keep the format, so the network never reorders between layers. A one-channel input
// is NCHW and channels-last at once, so its network runs NCHW.
//   Tensor MobileNetV2::forward(const Tensor& x) { Tensor y = features_->forward(conv_net_input(*this, x)); ...
Tensor conv_net_input(Module& net, const Tensor& x, bool automatic = true);

}  // namespace octet
