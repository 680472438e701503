#include "layers/activation.h"

#include "core/ops/elementwise.h"
#include "layers/fusion.h"

namespace octet {

Tensor ReLU::forward(const Tensor& x) {
  Tensor y = absorbed_ ? x : relu(x);
  fusion::record(*this, {x}, y);
  return y;
}

Tensor ReLU6::forward(const Tensor& x) {
  Tensor y = absorbed_ ? x : relu6(x);
  fusion::record(*this, {x}, y);
  return y;
}

}  // namespace octet
