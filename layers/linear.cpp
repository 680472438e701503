#include "layers/linear.h"

#include <cmath>

#include "core/ops/linalg.h"
#include "layers/init.h"
#include "layers/quantized.h"
#include "quant/int8_linear.h"

namespace octet {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias)
    : in_features_(in_features), out_features_(out_features) {
  OCTET_CHECK(in_features > 0 && out_features > 0, "Linear: expected positive sizes, got in_features=", in_features,
              ", out_features=", out_features);
  weight_ = register_parameter("weight", empty({out_features, in_features}));
  if (bias) bias_ = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight_, std::sqrt(5.0));
  double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
  if (bias_.defined()) init::uniform_(bias_, -bound, bound);
}

Tensor Linear::forward(const Tensor& x) {
  OCTET_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features_, "Linear: expected input [..., ", in_features_,
              "], got ", x.defined() ? x.shape() : Shape{});
  if (inference_) {
    detail::check_inference_only("Linear", inference_->spec(), is_training(), {x, weight_, bias_});
    return inference_->forward(x);
  }
  if (int8_) return quant::int8_linear(x, weight_, bias_, int8_);
  return linear(x, weight_, bias_);
}

std::string Linear::extra_repr() const {
  return detail::str_cat("in_features=", in_features_, ", out_features=", out_features_,
                         ", bias=", bias_.defined() ? "true" : "false", int8_ ? ", int8" : "",
                         inference_ ? ", " + inference_->spec().name() : std::string());
}

}  // namespace octet
