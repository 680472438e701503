#include "optim/clip.h"

#include <array>
#include <cmath>
#include <map>
#include <utility>

#include "core/autograd.h"
#include "core/ops/elementwise.h"
#include "optim/kernels.h"

namespace octet {
namespace {

// The squares of every gradient, by device (each device's sum in one call, optim::dispatch::sum_squares).
ExactSum squares_of(const std::vector<Tensor>& grads) {
  std::map<std::pair<DeviceType, int>, std::vector<Tensor>> by_device;
  for (const Tensor& g : grads) by_device[{g.device().type, g.device().index}].push_back(g);
  ExactSum sum;
  for (const auto& [device, gs] : by_device) sum.merge(optim::dispatch::sum_squares(gs));
  return sum;
}

// The clip itself, once the total is known.
double clip_to(std::vector<Tensor>& grads, double total, double max_norm) {
  if (!std::isfinite(total)) return total;
  const double coef = max_norm / (total + 1e-6);
  if (coef >= 1.0) return total;
  NoGradGuard no_grad;
  // g * T(coef) on g's device, element by element as an in-place loop would round it.
  for (Tensor& g : grads) g.copy_(g.contiguous() * coef);
  return total;
}

void check_max_norm(double max_norm) {
  OCTET_CHECK(max_norm >= 0.0, "clip_grad_norm: expected max_norm >= 0, got ", max_norm);
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  check_max_norm(max_norm);
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  return clip_to(grads, std::sqrt(squares_of(grads).value()), max_norm);
}

double clip_grad_norm(const Optimizer& optimizer, double max_norm) {
  check_max_norm(max_norm);
  std::vector<Tensor> grads;
  for (auto& [name, g] : optimizer.shard_grads()) grads.push_back(g);
  std::array<ExactSum, 1> sum{squares_of(grads)};
  optimizer.sum_over_shards(sum);
  return clip_to(grads, std::sqrt(sum[0].value()), max_norm);
}

std::vector<std::pair<std::string, double>> grad_norms(const Optimizer& optimizer) {
  const NamedTensors grads = optimizer.shard_grads();
  std::vector<ExactSum> sums;
  for (const auto& [name, g] : grads) sums.push_back(squares_of({g}));
  optimizer.sum_over_shards(sums);
  std::vector<std::pair<std::string, double>> out;
  for (size_t i = 0; i < grads.size(); ++i) out.emplace_back(grads[i].first, std::sqrt(sums[i].value()));
  return out;
}

}  // namespace octet
