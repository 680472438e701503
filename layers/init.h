// In-place parameter initialization, PyTorch's torch.nn.init: each function fills `t` under
// NoGradGuard (so it works on parameters that require grad) from `gen`, or from
// default_generator() when none is given, and returns the same handle.
//   init::kaiming_normal_(conv->weight_, 0.0, init::FanMode::fan_out, init::Nonlinearity::relu);
//   init::zeros_(conv->bias_);
#pragma once

#include "core/tensor.h"

namespace octet {
class Generator;
}

namespace octet::init {

enum class FanMode { fan_in, fan_out };
enum class Nonlinearity { linear, relu, leaky_relu, tanh, sigmoid };

struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
// For a weight [out, in, *kernel]: fan_in = in * prod(kernel), fan_out = out * prod(kernel)
// (for a grouped conv, `in` is already in/groups). Needs at least 2 dims.
Fans compute_fans(const Tensor& w);
// The recommended gain for a nonlinearity; `a` is leaky_relu's negative slope.
double calculate_gain(Nonlinearity nl, double a = 0.0);

Tensor uniform_(Tensor t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor normal_(Tensor t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
// U(-bound, bound) with bound = gain * sqrt(3 / fan). With a = sqrt(5), fan_in and leaky_relu
// this is PyTorch's default Linear/Conv2d weight init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor kaiming_uniform_(Tensor t, double a = 0.0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nl = Nonlinearity::leaky_relu, Generator* gen = nullptr);
// N(0, std^2) with std = gain / sqrt(fan).
Tensor kaiming_normal_(Tensor t, double a = 0.0, FanMode mode = FanMode::fan_in,
                       Nonlinearity nl = Nonlinearity::leaky_relu, Generator* gen = nullptr);

// U(-bound, bound) with bound = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010).
Tensor xavier_uniform_(Tensor t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace octet::init
