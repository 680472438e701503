// Linear: y = x w^T + b over the last dim, with PyTorch's default initialization.
// Optionally INT8-trained (Unified INT8 carried to Linear layers, quant/int8_linear.h: input and
// weight quantized to int8 in the forward, the output gradient in the backward), with a shared
// quant::Int8Layer holding the config and the stats (quant/int8_model.h converts a whole model);
// or runs a quantized inference layer in its place (layers/quantized.h: PrecisionBatching or int8),
// set in place by set_inference.
//   auto fc = std::make_shared<Linear>(512, 10);   Tensor logits = (*fc)(features);  // [N,512] -> [N,10]
//   fc->set_int8(std::make_shared<quant::Int8Layer>());   // from now on trained in INT8
//   fc->set_inference(std::make_shared<PbLinear>(*fc, quant::PbConfig{4, 16}));   // inference only now
#pragma once

#include <memory>

#include "layers/module.h"

namespace octet {
namespace quant {
struct Int8Layer;  // quant/int8.h
}

class QuantLinear;

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

  // Quantized inference: forward runs `q` (made from this layer's weights; an Error while training or
  // when a gradient is needed); nullptr returns to float. The parameters stay, for saving and training.
  void set_inference(std::shared_ptr<QuantLinear> q) { inference_ = std::move(q); }
  const std::shared_ptr<QuantLinear>& inference() const { return inference_; }

  // INT8 training: forward and backward through quant::int8_linear with this layer state (shared
  // with its autograd nodes, which update its stats); nullptr returns to float. A quantized
  // inference layer, when set, runs instead.
  void set_int8(std::shared_ptr<quant::Int8Layer> layer) { int8_ = std::move(layer); }
  const std::shared_ptr<quant::Int8Layer>& int8() const { return int8_; }

  int64_t in_features_, out_features_;
  Tensor weight_;
  Tensor bias_;  // undefined without bias

 private:
  std::shared_ptr<QuantLinear> inference_;  // null: float
  std::shared_ptr<quant::Int8Layer> int8_;  // null: float
};

}  // namespace octet
