#include "layers/batch_norm.h"

#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "core/ops/nn.h"
#include "layers/init.h"

namespace octet {

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum)
    : num_features_(num_features), eps_(eps), momentum_(momentum) {
  OCTET_CHECK(num_features > 0, "BatchNorm2d: expected num_features > 0, got ", num_features);
  OCTET_CHECK(eps > 0, "BatchNorm2d: expected eps > 0, got ", eps);
  OCTET_CHECK(momentum >= 0 && momentum <= 1, "BatchNorm2d: expected momentum in [0, 1], got ", momentum);
  weight_ = register_parameter("weight", empty({num_features}));
  bias_ = register_parameter("bias", empty({num_features}));
  running_mean_ = register_buffer("running_mean", empty({num_features}));
  running_var_ = register_buffer("running_var", empty({num_features}));
  num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, DType::i64));
  reset_parameters();
}

void BatchNorm2d::reset_parameters() {
  init::ones_(weight_);
  init::zeros_(bias_);
  init::zeros_(running_mean_);
  init::ones_(running_var_);
  init::zeros_(num_batches_tracked_);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  OCTET_CHECK(x.defined() && x.dim() == 4 && x.size(1) == num_features_, "BatchNorm2d: expected input [N, ",
              num_features_, ", H, W], got ", x.defined() ? x.shape() : Shape{});
  OCTET_CHECK(x.dtype() == weight_.dtype(), "BatchNorm2d: input dtype ", x.dtype(), " differs from the parameters' ",
              weight_.dtype(), " (convert the module with Module::to)");
  Tensor y = batch_norm(x, running_mean_, running_var_, weight_, bias_, is_training(), momentum_, eps_);
  if (is_training()) {
    NoGradGuard ng;
    num_batches_tracked_.copy_(num_batches_tracked_ + 1.0);  // on its device: no host round trip
  }
  return y;
}

std::string BatchNorm2d::extra_repr() const {
  return detail::str_cat(num_features_, ", eps=", eps_, ", momentum=", momentum_);
}

}  // namespace octet
