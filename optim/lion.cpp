// Lion's update: one fused loop over each block (no temporaries), in the parameter's type.
#include "optim/lion.h"

namespace octet {
namespace {

void check_options(const LionOptions& o) {
  OCTET_CHECK(o.lr_ >= 0.0, "Lion: expected lr >= 0, got ", o.lr_);
  OCTET_CHECK(o.betas_.first >= 0.0 && o.betas_.first <= 1.0 && o.betas_.second >= 0.0 && o.betas_.second <= 1.0,
              "Lion: expected betas in [0, 1], got (", o.betas_.first, ", ", o.betas_.second, ")");
  OCTET_CHECK(o.weight_decay_ >= 0.0, "Lion: expected weight_decay >= 0, got ", o.weight_decay_);
}

// torch.sign: 0 stays 0, NaN stays NaN (so divergence stays visible).
template <typename T>
T sign(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

template <typename T>
void lion_block(const LionOptions& o, T* p, const T* g, const StateBlock<T>& b) {
  const T lr = static_cast<T>(o.lr_), shrink = static_cast<T>(1.0 - o.lr_ * o.weight_decay_);
  const T b1 = static_cast<T>(o.betas_.first), one_b1 = static_cast<T>(1.0 - o.betas_.first);
  const T b2 = static_cast<T>(o.betas_.second), one_b2 = static_cast<T>(1.0 - o.betas_.second);
  const bool decay = o.weight_decay_ != 0.0;
  p += b.begin;
  g += b.begin;
  T* m = b.buffer(0);
  for (int64_t i = 0; i < b.n; ++i) {
    if (decay) p[i] *= shrink;
    p[i] -= lr * sign(b1 * m[i] + one_b1 * g[i]);
    m[i] = b2 * m[i] + one_b2 * g[i];
  }
}

}  // namespace

Lion::Lion(NamedTensors params, const LionOptions& options, const StateOptions& state)
    : Lion(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

Lion::Lion(std::vector<ParamGroup> groups, const LionOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "Lion", state) {
  for (size_t g = 0; g < num_groups(); ++g) check_options(options(g));
}

const LionOptions& Lion::options(size_t group) const { return static_cast<const LionOptions&>(group_options(group)); }
LionOptions& Lion::options(size_t group) { return static_cast<LionOptions&>(group_options(group)); }

std::vector<std::string> Lion::state_buffers(const OptimizerOptions&) const { return {"exp_avg"}; }

void Lion::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const LionOptions&>(options);
  dispatch_float(param.dtype(), "Lion", [&]<typename T>() {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { lion_block(o, p, g, b); }));
  });
}

}  // namespace octet
