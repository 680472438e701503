#include "layers/layer_norm.h"

#include <sstream>

#include "core/ops/norm.h"
#include "layers/init.h"

namespace octet {

LayerNorm::LayerNorm(Shape normalized_shape, double eps, bool elementwise_affine)
    : normalized_shape_(std::move(normalized_shape)), eps_(eps) {
  OCTET_CHECK(!normalized_shape_.empty(), "LayerNorm: normalized_shape must not be empty");
  for (int64_t d : normalized_shape_)
    OCTET_CHECK(d > 0, "LayerNorm: expected positive sizes in normalized_shape, got ", normalized_shape_);
  OCTET_CHECK(eps > 0, "LayerNorm: expected eps > 0, got ", eps);
  if (elementwise_affine) {
    weight_ = register_parameter("weight", empty(normalized_shape_));
    bias_ = register_parameter("bias", empty(normalized_shape_));
  }
  reset_parameters();
}

void LayerNorm::reset_parameters() {
  if (!weight_.defined()) return;
  init::ones_(weight_);
  init::zeros_(bias_);
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape_, weight_, bias_, eps_); }

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < normalized_shape_.size(); ++i) os << (i ? ", " : "") << normalized_shape_[i];
  os << (normalized_shape_.size() == 1 ? ",)" : ")") << ", eps=" << eps_
     << ", elementwise_affine=" << (weight_.defined() ? "true" : "false");
  return os.str();
}

}  // namespace octet
