// LAMB's update in two passes over the state's blocks: the norms, then the scaled update. Both
// passes compute the update direction with the same inline function, so the norm is exactly
// that of the direction applied.
#include "optim/lamb.h"

#include <algorithm>
#include <cmath>

#include "optim/layerwise.h"

namespace octet {
namespace {

void check_options(const LambOptions& o) {
  OCTET_CHECK(o.lr_ >= 0.0, "Lamb: expected lr >= 0, got ", o.lr_);
  OCTET_CHECK(o.eps_ >= 0.0, "Lamb: expected eps >= 0, got ", o.eps_);
  OCTET_CHECK(o.betas_.first >= 0.0 && o.betas_.first < 1.0 && o.betas_.second >= 0.0 && o.betas_.second < 1.0,
              "Lamb: expected betas in [0, 1), got (", o.betas_.first, ", ", o.betas_.second, ")");
  OCTET_CHECK(o.weight_decay_ >= 0.0, "Lamb: expected weight_decay >= 0, got ", o.weight_decay_);
}

// The per-step scalars in the parameter's type (bias corrections computed once in double).
template <typename T>
struct LambStep {
  T b1, b2, one_b1, one_b2, bias_c1, bias_c2_sqrt, eps, wd;
  bool decay;  // skipped at 0, so inf/nan weights stay out of u

  LambStep(const LambOptions& o, int64_t t)
      : b1(static_cast<T>(o.betas_.first)),
        b2(static_cast<T>(o.betas_.second)),
        one_b1(static_cast<T>(1.0 - o.betas_.first)),
        one_b2(static_cast<T>(1.0 - o.betas_.second)),
        bias_c1(static_cast<T>(1.0 - std::pow(o.betas_.first, static_cast<double>(t)))),
        bias_c2_sqrt(static_cast<T>(std::sqrt(1.0 - std::pow(o.betas_.second, static_cast<double>(t))))),
        eps(static_cast<T>(o.eps_)),
        wd(static_cast<T>(o.weight_decay_)),
        decay(o.weight_decay_ != 0.0) {}

  // Moves the moments m, v (copies of the old state) one step and returns u.
  T direction(T p, T g, T& m, T& v) const {
    m = b1 * m + one_b1 * g;
    v = b2 * v + one_b2 * (g * g);
    T u = (m / bias_c1) / (std::sqrt(v) / bias_c2_sqrt + eps);
    return decay ? u + wd * p : u;
  }
};

// Pass 1: the trust ratio of this update, from the old state (read-only).
template <typename T>
double lamb_ratio(const LambOptions& o, const LambStep<T>& s, const T* p, const T* g, ParamState& state) {
  BlockSums<2> sums;
  state.read_blocks(BlockRead<T>([&](const StateBlock<const T>& b) {
    const T* pb = p + b.begin;
    const T* gb = g + b.begin;
    const T* mb = b.buffer(0);
    const T* vb = b.buffer(1);
    double p_sq = 0.0, u_sq = 0.0;
    for (int64_t i = 0; i < b.n; ++i) {
      T m = mb[i], v = vb[i];
      const double u = s.direction(pb[i], gb[i], m, v);
      p_sq += static_cast<double>(pb[i]) * static_cast<double>(pb[i]);
      u_sq += u * u;
    }
    sums.add(b.begin, {p_sq, u_sq});
  }));
  const auto [p_sq, u_sq] = sums.total();
  const double r = trust_ratio(std::sqrt(p_sq), std::sqrt(u_sq));
  return o.trust_clip_ ? std::min(r, 1.0) : r;
}

// Pass 2: the same moments, stored, and p -= lr * r * u.
template <typename T>
void lamb_block(const LambStep<T>& s, T step, T* p, const T* g, const StateBlock<T>& b) {
  p += b.begin;
  g += b.begin;
  T* m = b.buffer(0);
  T* v = b.buffer(1);
  for (int64_t i = 0; i < b.n; ++i) {
    T mi = m[i], vi = v[i];
    const T u = s.direction(p[i], g[i], mi, vi);
    m[i] = mi;
    v[i] = vi;
    p[i] -= step * u;
  }
}

}  // namespace

Lamb::Lamb(NamedTensors params, const LambOptions& options, const StateOptions& state)
    : Lamb(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options, state) {}

Lamb::Lamb(std::vector<ParamGroup> groups, const LambOptions& defaults, const StateOptions& state)
    : Optimizer(std::move(groups), defaults, "Lamb", state) {
  for (size_t g = 0; g < num_groups(); ++g) check_options(options(g));
}

const LambOptions& Lamb::options(size_t group) const { return static_cast<const LambOptions&>(group_options(group)); }
LambOptions& Lamb::options(size_t group) { return static_cast<LambOptions&>(group_options(group)); }

std::vector<std::string> Lamb::state_buffers(const OptimizerOptions&) const { return {"exp_avg", "exp_avg_sq"}; }

void Lamb::update(const OptimizerOptions& options, const Tensor& param, const Tensor& grad, ParamState& state) const {
  const auto& o = static_cast<const LambOptions&>(options);
  dispatch_float(param.dtype(), "Lamb", [&]<typename T>() {
    T* p = param.data<T>();
    const T* g = grad.data<T>();
    const LambStep<T> s(o, state.step());
    const double r = o.layer_adaptation_ ? lamb_ratio(o, s, p, g, state) : 1.0;
    const T step = static_cast<T>(o.lr_ * r);
    state.for_each_block(BlockUpdate<T>([&](const StateBlock<T>& b) { lamb_block(s, step, p, g, b); }));
  });
}

}  // namespace octet
