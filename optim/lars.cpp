// LARS's update: the layer's local lr from the norms of p and g (pass 1, no state), then one
// fused SGD-momentum loop over each block of the state (pass 2).
#include "optim/lars.h"

#include <cmath>

#include "optim/layerwise.h"

namespace octet {
namespace {

void check_options(const LARSOptions& o) {
  OCTET_CHECK(o.lr_ >= 0.0, "LARS: expected lr >= 0, got ", o.lr_);
  OCTET_CHECK(o.momentum_ >= 0.0, "LARS: expected momentum >= 0, got ", o.momentum_);
  OCTET_CHECK(o.weight_decay_ >= 0.0, "LARS: expected weight_decay >= 0, got ", o.weight_decay_);
  OCTET_CHECK(o.trust_coefficient_ > 0.0, "LARS: expected trust_coefficient > 0, got ", o.trust_coefficient_);
  OCTET_CHECK(o.eps_ >= 0.0, "LARS: expected eps >= 0, got ", o.eps_);
}

// Pass 1: trust_coefficient * ||p|| / (||g|| + weight_decay * ||p|| + eps), or 1.
template <typename T>
double local_lr(const LARSOptions& o, const T* p, const T* g, int64_t n) {
  const double p_norm = std::sqrt(sum_squares(p, n)), g_norm = std::sqrt(sum_squares(g, n));
  if (p_norm == 0.0 || g_norm == 0.0) return 1.0;
  return o.trust_coefficient_ * p_norm / (g_norm + o.weight_decay_ * p_norm + o.eps_);
}

// Pass 2: SGD momentum on the scaled gradient.
template <typename T>
void lars_block(const LARSOptions& o, T scale, bool first, T* p, const T* g, const StateBlock<T>& b) {
  const T lr = static_cast<T>(o.lr_), wd = static_cast<T>(o.weight_decay_), mom = static_cast<T>(o.momentum_);
  const bool decay = o.weight_decay_ != 0.0;  // skipped at 0, so inf/nan weights stay out of d
  p += b.begin;
  g += b.begin;
  if (o.momentum_ == 0.0) {
    for (int64_t i = 0; i < b.n; ++i) p[i] -= lr * ((decay ? g[i] + wd * p[i] : g[i]) * scale);
    return;
  }
  T* buf = b.buffer(0);
  for (int64_t i = 0; i < b.n; ++i) {
    const T d = (decay ? g[i] + wd * p[i] : g[i]) * scale;
    buf[i] = first ? d : mom * buf[i] + d;
    p[i] -= lr * buf[i];
  }
}

}  // namespace

LARS::LARS(NamedTensors params, const LARSOptions& options, const StateOptions& state)
    : LARS(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

LARS::LARS(std::vector<ParamGroup> groups, const LARSOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "LARS", state) {
  for (size_t g = 0; g < num_groups(); ++g) check_options(options(g));
}

const LARSOptions& LARS::options(size_t group) const { return static_cast<const LARSOptions&>(group_options(group)); }
LARSOptions& LARS::options(size_t group) { return static_cast<LARSOptions&>(group_options(group)); }

std::vector<std::string> LARS::state_buffers(const OptimizerOptions& options) const {
  if (static_cast<const LARSOptions&>(options).momentum_ == 0.0) return {};
  return {"momentum_buffer"};
}

void LARS::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const LARSOptions&>(options);
  const bool first = state.step() == 1;
  dispatch_float(param.dtype(), "LARS", [&]<typename T>() {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    const T scale = static_cast<T>(o.layer_adaptation_ ? local_lr(o, p, g, param.numel()) : 1.0);
    state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { lars_block(o, scale, first, p, g, b); }));
  });
}

}  // namespace octet
