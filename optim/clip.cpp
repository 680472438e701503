#include "optim/clip.h"

#include <cmath>
#include <map>
#include <utility>

#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "optim/kernels.h"

namespace octet {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  OCTET_CHECK(max_norm >= 0.0, "clip_grad_norm: expected max_norm >= 0, got ", max_norm);
  std::vector<Tensor> grads;
  // By device, the CPU first: each device's sum in a fixed order (optim::dispatch::sum_squares:
  // serial on the CPU, so the result does not depend on the thread count; a fixed-order reduction
  // read back once on a GPU).
  std::map<std::pair<DeviceType, int>, std::vector<Tensor>> by_device;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    const Tensor& g = p.grad();
    grads.push_back(g);
    by_device[{g.device().type, g.device().index}].push_back(g);
  }
  double sum_sq = 0.0;
  for (const auto& [device, gs] : by_device) sum_sq += optim::dispatch::sum_squares(gs);
  const double total = std::sqrt(sum_sq);
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return total;
  NoGradGuard no_grad;
  // g * T(coef) on g's device, element by element as an in-place loop would round it.
  for (Tensor& g : grads) g.copy_(g.contiguous() * coef);
  return total;
}

}  // namespace octet
