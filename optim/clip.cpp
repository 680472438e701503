#include "optim/clip.h"

#include <cmath>
#include <map>

#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "optim/run_rule.h"

namespace octet {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  OCTET_CHECK(max_norm >= 0.0, "clip_grad_norm: expected max_norm >= 0, got ", max_norm);
  std::vector<Tensor> grads;
  std::map<int, std::vector<Tensor>> device_grads;  // by CUDA device index
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    const Tensor& g = p.grad();
    OCTET_CHECK(g.device().is_cpu() || g.device().is_cuda(), "clip_grad_norm: no kernels for gradients on ",
                g.device());
    grads.push_back(g);
    if (g.device().is_cuda()) device_grads[g.device().index].push_back(g);
  }
  // Serial double sums on the CPU, so the result does not depend on the thread count; on a GPU
  // a fixed-order reduction (optim/cuda/), read back once per device.
  double sum_sq = 0.0;
  for (const Tensor& g : grads) {
    if (!g.device().is_cpu()) continue;
    Tensor c = g.contiguous();
    dispatch_float(c.dtype(), "clip_grad_norm", [&]<typename T>() {
      const T* x = c.data<T>();
      for (int64_t i = 0, n = c.numel(); i < n; ++i) sum_sq += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    });
  }
  for (const auto& [index, gs] : device_grads) sum_sq += device_sum_squares(gs);
  const double total = std::sqrt(sum_sq);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return total;
  NoGradGuard no_grad;
  for (Tensor& g : grads) {
    if (!g.is_contiguous() || !g.device().is_cpu()) {  // the tensor ops scale on any device
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
