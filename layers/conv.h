// Conv2d: 2-D convolution over NCHW inputs with a square kernel, PyTorch's default initialization.
// Optionally INT8-trained (Unified INT8, quant/int8_conv.h): input and weight quantized to int8 in
// the forward pass, the output gradient in the backward pass; the layer's Int8Layer holds the
// config and the stats the autograd nodes update (quant/int8_model.h converts a whole model).
//   auto conv = std::make_shared<Conv2d>(3, 16, 3, Conv2dOptions().padding(1), /*bias=*/false);
//   Tensor y = (*conv)(x);   // [N,3,H,W] -> [N,16,H,W]
//   conv->set_int8(std::make_shared<quant::Int8Layer>());   // from now on INT8
#pragma once

#include <cstdint>
#include <memory>

#include "core/ops/conv.h"
#include "layers/batch_norm.h"
#include "layers/module.h"
#include "quant/int8.h"

namespace octet {

// Where a network's convolutions turn its input channels-last (core/memory_format.h), as the
// fusion pass set it on the first convolution: not here, this layer's input, or its output (a
// one-channel input is NCHW and channels-last at once, so the format starts after it).
enum class ChannelsLastAt : uint8_t { none, input, output };

class Conv2d : public Module, public BatchNormConsumer {
 public:
  // weight [out, in/groups, k, k] and bias [out] from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
  // fan_in = in/groups * k * k (kaiming_uniform, a = sqrt(5)).
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, const Conv2dOptions& opts = {},
         bool bias = true);
  // x [N, in, H, W] -> [N, out, P, Q]. Where the fusion pass set input_bn_ and applies() holds, x is
  // the batch norm's input and one op does both (quant::int8_conv2d_batch_norm: the batch norm
  // writes this layer's int8 codes, the float activation is never written; the same bits).
  // final: the fused forms rely on what it computes.
  Tensor forward(const Tensor& x) final;
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  void reset_parameters();
  // An INT8 layer takes `bn` in training mode, unsynchronized, unless quant::set_int8_bn_fusion
  // turned that off.
  bool applies(const BatchNorm2d& bn) const override;

  // INT8 mode: forward and backward through quant::int8_conv2d with this layer state (shared with
  // the autograd nodes, which update its stats); nullptr returns to float convolution.
  void set_int8(std::shared_ptr<quant::Int8Layer> layer) { int8_ = std::move(layer); }
  const std::shared_ptr<quant::Int8Layer>& int8() const { return int8_; }

  int64_t in_channels_, out_channels_, kernel_size_;
  Conv2dOptions options_;
  Tensor weight_;
  Tensor bias_;  // undefined without bias

  // ---- set by the fusion pass (layers/fusion.h), cleared by clear_fusion()
  std::weak_ptr<BatchNorm2d> input_bn_;  // BN (-> its act_) in front: applied here where applies()
  // Channels-last where channels_last_pays() (CPU, f32) under OCTET_CHANNELS_LAST=on, and under
  // auto where channels_last_auto_ (a model measured faster so, with no INT8 layer).
  ChannelsLastAt channels_last_ = ChannelsLastAt::none;
  bool channels_last_auto_ = false;
  void clear_fusion();

 private:
  Tensor to_format(const Tensor& t) const;
  std::shared_ptr<quant::Int8Layer> int8_;  // null: float
};

}  // namespace octet
