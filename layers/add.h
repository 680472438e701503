// Add: a + b as a module, so that a model's residual connection is a module the fusion pass
// (layers/fusion.h) can see, as PyTorch's quantizable models use FloatFunctional.add. Fused with
// the batch norm in front of it (and the ReLU after), the residual is added in the norm's output
// pass: relu(bn(y) + x) as one op, the same bits.
//   auto add = std::make_shared<Add>();   Tensor y = add->forward(block(x), x);
#pragma once

#include <memory>

#include "layers/batch_norm.h"
#include "layers/module.h"

namespace octet {

class Add : public Module, public BatchNormConsumer {
 public:
  // a + b, tensors of one shape.
  Tensor forward(const Tensor& a, const Tensor& b);
  // An error: Add takes two inputs.
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Add"; }
  bool applies(const BatchNorm2d& bn) const override { return input_bn_.lock().get() == &bn; }

  // ---- set by the fusion pass, cleared by clear_fusion()
  std::weak_ptr<BatchNorm2d> input_bn_;        // the batch norm whose output is one input: applied here
  bool bn_feeds_b_ = false;                    // which input it is
  NormActivation act_ = NormActivation::none;  // applied after the add (the ReLU(6) after passes its input on)
  void clear_fusion();
};

}  // namespace octet
