#include "layers/batch_norm.h"

#include "core/autograd.h"
#include "core/ops/concat.h"
#include "core/ops/elementwise.h"
#include "core/ops/norm.h"
#include "core/ops/reduce.h"
#include "layers/distributed.h"
#include "layers/fusion.h"
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
  const std::shared_ptr<BatchNormConsumer> consumer = consumer_.lock();
  Tensor y = consumer && consumer->applies(*this) ? x : forward(x, act_);
  fusion::record(*this, {x}, y);
  return y;
}

void BatchNorm2d::clear_fusion() {
  act_ = NormActivation::none;
  consumer_.reset();
}

void BatchNorm2d::check_input(const Tensor& x) const {
  OCTET_CHECK(x.defined() && x.dim() == 4 && x.size(1) == num_features_, "BatchNorm2d: expected input [N, ",
              num_features_, ", H, W], got ", x.defined() ? x.shape() : Shape{});
  // bf16 activations (autocast) normalize with f32 parameters
  OCTET_CHECK(opmath_dtype(x.dtype()) == weight_.dtype(), "BatchNorm2d: input dtype ", x.dtype(),
              " differs from the parameters' ", weight_.dtype(), " (convert the module with Module::to)");
}

void BatchNorm2d::count_batch() {
  if (!is_training()) return;
  NoGradGuard ng;
  num_batches_tracked_.copy_(num_batches_tracked_ + 1.0);  // on its device: no host round trip
}

Tensor BatchNorm2d::forward(const Tensor& x, NormActivation act, const Tensor& residual) {
  check_input(x);
  Tensor y;
  if (sync_ && sync_->size() > 1 && is_training()) {
    y = sync_forward(x);
    if (residual.defined()) y = y + residual;
    if (act == NormActivation::relu) y = relu(y);
    if (act == NormActivation::relu6) y = relu6(y);
  } else {
    y = batch_norm(x, {.running_mean = running_mean_,
                       .running_var = running_var_,
                       .weight = weight_,
                       .bias = bias_,
                       .training = is_training(),
                       .momentum = momentum_,
                       .eps = eps_,
                       .act = act,
                       .residual = residual});
  }
  count_batch();
  return y;
}

// Statistics over the global batch, in two passes as batch_norm's (no E[x^2] - E[x]^2
// cancellation): every rank's per-channel sums and count, added over the ranks, give the mean;
// then the sums of squared deviations from it, added too, the variance. The sums are added
// differentiably (dist_sum: the backward adds the ranks' gradients), so the backward is the
// global batch's. The running statistics are updated as batch_norm updates them.
Tensor BatchNorm2d::sync_forward(const Tensor& x) {
  if (x.dtype() == DType::bf16) return sync_forward(x.to(DType::f32)).to(DType::bf16);  // computed in f32
  const int64_t c = num_features_;
  const Shape b{1, c, 1, 1};
  const Tensor count = full({1}, static_cast<double>(x.numel() / c), TensorOptions(x.dtype()).device(x.device()));
  const Tensor sums = dist_sum(cat({sum(x, {0, 2, 3}), count}, 0), *sync_);
  const double n = sums.narrow(0, c, 1).item();
  OCTET_CHECK(n > 1, "SyncBatchNorm: training needs more than one value per channel over the ranks, got ", n);
  const Tensor mean = sums.narrow(0, 0, c) / n;
  const Tensor d = x - mean.reshape(b);
  const Tensor var = dist_sum(sum(d * d, {0, 2, 3}), *sync_) / n;  // biased, as batch_norm normalizes
  Tensor y = d * rsqrt(var + eps_).reshape(b) * weight_.reshape(b) + bias_.reshape(b);
  NoGradGuard ng;
  running_mean_.copy_(running_mean_ * (1.0 - momentum_) + mean.detach() * momentum_);
  running_var_.copy_(running_var_ * (1.0 - momentum_) + var.detach() * (n / (n - 1.0)) * momentum_);
  return y;
}

std::string BatchNorm2d::extra_repr() const {
  return detail::str_cat(num_features_, ", eps=", eps_, ", momentum=", momentum_);
}

}  // namespace octet
