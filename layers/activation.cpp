#include "layers/activation.h"

#include "core/ops/elementwise.h"

namespace octet {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor ReLU6::forward(const Tensor& x) { return relu6(x); }

}  // namespace octet
