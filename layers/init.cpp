#include "layers/init.h"

#include <cmath>

#include "core/autograd.h"
#include "core/generator.h"

namespace octet::init {

Fans compute_fans(const Tensor& w) {
  OCTET_CHECK(w.defined() && w.dim() >= 2, "compute_fans: expected a weight with at least 2 dims, got ",
              w.defined() ? w.shape() : Shape{});
  int64_t receptive = 1;
  for (int64_t d = 2; d < w.dim(); ++d) receptive *= w.size(d);
  return {w.size(1) * receptive, w.size(0) * receptive};
}

double calculate_gain(Nonlinearity nl, double a) {
  switch (nl) {
    case Nonlinearity::linear:
    case Nonlinearity::sigmoid:
      return 1.0;
    case Nonlinearity::relu:
      return std::sqrt(2.0);
    case Nonlinearity::leaky_relu:
      return std::sqrt(2.0 / (1.0 + a * a));
    case Nonlinearity::tanh:
      return 5.0 / 3.0;
  }
  return 1.0;
}

Tensor uniform_(Tensor t, double low, double high, Generator* gen) {
  NoGradGuard ng;
  t.uniform_(low, high, gen);
  return t;
}

Tensor normal_(Tensor t, double mean, double std, Generator* gen) {
  NoGradGuard ng;
  t.normal_(mean, std, gen);
  return t;
}

Tensor constant_(Tensor t, double value) {
  NoGradGuard ng;
  t.fill_(value);
  return t;
}

Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

static double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nl, const char* op) {
  Fans f = compute_fans(t);
  int64_t fan = mode == FanMode::fan_in ? f.fan_in : f.fan_out;
  OCTET_CHECK(fan > 0, op, ": fan is zero for a weight of shape ", t.shape());
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl, "kaiming_uniform_");
  return uniform_(std::move(t), -bound, bound, gen);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  double std = kaiming_std(t, a, mode, nl, "kaiming_normal_");
  return normal_(std::move(t), 0.0, std, gen);
}

Tensor xavier_uniform_(Tensor t, double gain, Generator* gen) {
  Fans f = compute_fans(t);
  OCTET_CHECK(f.fan_in + f.fan_out > 0, "xavier_uniform_: fans are zero for a weight of shape ", t.shape());
  double bound = gain * std::sqrt(6.0 / static_cast<double>(f.fan_in + f.fan_out));
  return uniform_(std::move(t), -bound, bound, gen);
}

}  // namespace octet::init
