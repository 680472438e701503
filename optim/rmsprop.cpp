// RMSprop's update: one fused loop over each block (no temporaries), in the parameter's type.
#include "optim/rmsprop.h"

#include <cmath>

namespace octet {
namespace {

void check_options(const RMSpropOptions& o) {
  OCTET_CHECK(o.lr_ >= 0.0, "RMSprop: expected lr >= 0, got ", o.lr_);
  OCTET_CHECK(o.alpha_ >= 0.0 && o.alpha_ <= 1.0, "RMSprop: expected alpha in [0, 1], got ", o.alpha_);
  OCTET_CHECK(o.eps_ >= 0.0, "RMSprop: expected eps >= 0, got ", o.eps_);
  OCTET_CHECK(o.weight_decay_ >= 0.0, "RMSprop: expected weight_decay >= 0, got ", o.weight_decay_);
  OCTET_CHECK(o.momentum_ >= 0.0, "RMSprop: expected momentum >= 0, got ", o.momentum_);
}

template <typename T>
void rmsprop_block(const RMSpropOptions& o, T* p, const T* g, const StateBlock<T>& b) {
  const T lr = static_cast<T>(o.lr_), alpha = static_cast<T>(o.alpha_), one_alpha = static_cast<T>(1.0 - o.alpha_);
  const T eps = static_cast<T>(o.eps_), wd = static_cast<T>(o.weight_decay_), mom = static_cast<T>(o.momentum_);
  const bool decay = o.weight_decay_ != 0.0;  // skipped at 0, so inf/nan weights stay out of g
  p += b.begin;
  g += b.begin;
  size_t next = 0;
  T* v = b.buffer(next++);
  T* buf = o.momentum_ > 0.0 ? b.buffer(next++) : nullptr;
  T* g_avg = o.centered_ ? b.buffer(next++) : nullptr;
  for (int64_t i = 0; i < b.n; ++i) {
    T grad = decay ? g[i] + wd * p[i] : g[i];
    v[i] = alpha * v[i] + one_alpha * (grad * grad);
    T denom;
    if (g_avg) {
      g_avg[i] = alpha * g_avg[i] + one_alpha * grad;
      denom = std::sqrt(v[i] - g_avg[i] * g_avg[i]) + eps;
    } else {
      denom = std::sqrt(v[i]) + eps;
    }
    if (buf) {
      buf[i] = mom * buf[i] + grad / denom;
      p[i] -= lr * buf[i];
    } else {
      p[i] -= lr * (grad / denom);
    }
  }
}

}  // namespace

RMSprop::RMSprop(NamedTensors params, const RMSpropOptions& options, const StateOptions& state)
    : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "RMSprop", state) {
  for (size_t g = 0; g < num_groups(); ++g) check_options(options(g));
}

const RMSpropOptions& RMSprop::options(size_t group) const {
  return static_cast<const RMSpropOptions&>(group_options(group));
}
RMSpropOptions& RMSprop::options(size_t group) { return static_cast<RMSpropOptions&>(group_options(group)); }

std::vector<std::string> RMSprop::state_buffers(const OptimizerOptions& options) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  std::vector<std::string> names = {"square_avg"};
  if (o.momentum_ > 0.0) names.push_back("momentum_buffer");
  if (o.centered_) names.push_back("grad_avg");
  return names;
}

void RMSprop::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad,
                     ParamState& state) const {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  dispatch_float(param.dtype(), "RMSprop", [&]<typename T>() {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { rmsprop_block(o, p, g, b); }));
  });
}

}  // namespace octet
