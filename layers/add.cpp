#include "layers/add.h"

#include "core/ops/elementwise.h"
#include "layers/fusion.h"

namespace octet {

Tensor Add::forward(const Tensor& a, const Tensor& b) {
  OCTET_CHECK(a.defined() && b.defined() && a.shape() == b.shape(), "Add: expected two tensors of one shape, got ",
              a.defined() ? a.shape() : Shape{}, " and ", b.defined() ? b.shape() : Shape{});
  Tensor y;
  if (const std::shared_ptr<BatchNorm2d> bn = input_bn_.lock())
    y = bn_feeds_b_ ? bn->forward(b, act_, a) : bn->forward(a, act_, b);  // the sum commutes bit for bit
  else
    y = a + b;
  fusion::record(*this, {a, b}, y);
  return y;
}

Tensor Add::forward(const Tensor& x) {
  OCTET_FAIL("Add: expected two inputs, forward(a, b), got one of shape ", x.defined() ? x.shape() : Shape{});
}

void Add::clear_fusion() {
  input_bn_.reset();
  bn_feeds_b_ = false;
  act_ = NormActivation::none;
}

}  // namespace octet
