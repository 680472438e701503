// Hand-made INT8 layer states for tests of what reads them (DCLR, the trainer's telemetry).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "quant/int8.h"
#include "quant/int8_model.h"

namespace octet::testing {

// A layer whose stats read `cos_distance`; NaN means "no backward pass yet".
inline std::shared_ptr<quant::Int8Layer> layer_with(double cos_distance) {
  auto l = std::make_shared<quant::Int8Layer>();
  l->stats.cos_distance = cos_distance;
  l->stats.backward_steps = std::isnan(cos_distance) ? 0 : 1;
  return l;
}

// Stats after `steps` backward passes with d_c = cos_distance.
inline void set_backward(quant::Int8Stats& s, double cos_distance, int64_t steps = 1) {
  s.cos_distance = cos_distance;
  s.backward_steps = steps;
}

// Two INT8 layers with no backward pass yet: "conv_a" (weight and bias) and "conv_b" (weight).
inline std::vector<quant::Int8Module> two_layers() {
  return {{"conv_a", layer_with(NAN), {"conv_a.weight", "conv_a.bias"}},
          {"conv_b", layer_with(NAN), {"conv_b.weight"}}};
}

}  // namespace octet::testing
