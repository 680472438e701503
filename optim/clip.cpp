#include "optim/clip.h"

#include <cmath>

#include "core/autograd.h"
#include "core/ops/elementwise.h"

namespace octet {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  OCTET_CHECK(max_norm >= 0.0, "clip_grad_norm: expected max_norm >= 0, got ", max_norm);
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    OCTET_CHECK(p.grad().device().is_cpu(), "clip_grad_norm: expected cpu gradients, got ", p.grad().device().str());
    grads.push_back(p.grad());
  }
  // Serial double sums, so the result does not depend on the thread count.
  double sum_sq = 0.0;
  for (const Tensor& g : grads) {
    Tensor c = g.contiguous();
    dispatch_float(c.dtype(), "clip_grad_norm", [&]<typename T>() {
      const T* x = c.data<T>();
      for (int64_t i = 0, n = c.numel(); i < n; ++i) sum_sq += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    });
  }
  const double total = std::sqrt(sum_sq);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return total;
  NoGradGuard no_grad;
  for (Tensor& g : grads) {
    if (!g.is_contiguous()) {
      g.copy_(g.contiguous() * coef);
      continue;
    }
    dispatch_float(g.dtype(), "clip_grad_norm", [&]<typename T>() {
      T* x = g.data<T>();
      const T c = static_cast<T>(coef);
      for (int64_t i = 0, n = g.numel(); i < n; ++i) x[i] *= c;
    });
    g.storage()->bump_version();
  }
  return total;
}

}  // namespace octet
