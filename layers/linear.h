// Linear: y = x w^T + b over the last dim, with PyTorch's default initialization.
// Optionally runs a quantized inference layer in its place (layers/quantized.h: PrecisionBatching
// or int8), set in place by set_inference, as Conv2d::set_int8 does for INT8 training.
//   auto fc = std::make_shared<Linear>(512, 10);   Tensor logits = (*fc)(features);  // [N,512] -> [N,10]
//   fc->set_inference(std::make_shared<PbLinear>(*fc, quant::PbConfig{4, 16}));   // inference only now
#pragma once

#include <memory>

#include "layers/module.h"

namespace octet {

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

  int64_t in_features_, out_features_;
  Tensor weight_;
  Tensor bias_;  // undefined without bias

 private:
  std::shared_ptr<QuantLinear> inference_;  // null: float
};

}  // namespace octet
