// SGD's update: one fused loop over each block (no temporaries), in the parameter's type.
#include "optim/sgd.h"

namespace octet {
namespace {

void check_options(const SGDOptions& o) {
  OCTET_CHECK(o.lr_ >= 0.0, "SGD: expected lr >= 0, got ", o.lr_);
  OCTET_CHECK(o.momentum_ >= 0.0, "SGD: expected momentum >= 0, got ", o.momentum_);
  OCTET_CHECK(o.weight_decay_ >= 0.0, "SGD: expected weight_decay >= 0, got ", o.weight_decay_);
  OCTET_CHECK(!o.nesterov_ || (o.momentum_ > 0.0 && o.dampening_ == 0.0),
              "SGD: nesterov expected momentum > 0 and dampening 0, got momentum ", o.momentum_, " dampening ",
              o.dampening_);
}

template <typename T>
void sgd_update(const SGDOptions& o, bool first, T* p, const T* g, const StateBlock<T>& b) {
  const T lr = static_cast<T>(o.lr_), wd = static_cast<T>(o.weight_decay_);
  const T mom = static_cast<T>(o.momentum_), keep = static_cast<T>(1.0 - o.dampening_);
  const bool decay = o.weight_decay_ != 0.0;  // skipped at 0, so inf/nan weights stay out of d
  p += b.begin;
  g += b.begin;
  if (o.momentum_ == 0.0) {
    for (int64_t i = 0; i < b.n; ++i) p[i] -= lr * (decay ? g[i] + wd * p[i] : g[i]);
    return;
  }
  T* buf = b.buffer(0);
  for (int64_t i = 0; i < b.n; ++i) {
    T d = decay ? g[i] + wd * p[i] : g[i];
    buf[i] = first ? d : mom * buf[i] + keep * d;
    p[i] -= lr * (o.nesterov_ ? d + mom * buf[i] : buf[i]);
  }
}

}  // namespace

SGD::SGD(NamedTensors params, const SGDOptions& options, const StateOptions& state)
    : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "SGD", state) {
  for (size_t g = 0; g < num_groups(); ++g) check_options(options(g));
}

const SGDOptions& SGD::options(size_t group) const { return static_cast<const SGDOptions&>(group_options(group)); }
SGDOptions& SGD::options(size_t group) { return static_cast<SGDOptions&>(group_options(group)); }

std::vector<std::string> SGD::state_buffers(const OptimizerOptions& options) const {
  if (static_cast<const SGDOptions&>(options).momentum_ == 0.0) return {};
  return {"momentum_buffer"};
}

void SGD::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const SGDOptions&>(options);
  bool first = state.step() == 1;
  dispatch_float(param.dtype(), "SGD", [&]<typename T>() {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { sgd_update(o, first, p, g, b); }));
  });
}

}  // namespace octet
