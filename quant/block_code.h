// The per-element steps of block-wise quantization (definition in quant/blockwise.h), written once
// for the CPU kernels and the CUDA kernels (OCTET_HD), so both give the same codes and absmax bit
// for bit: the same finite-only absmax, the same IEEE division and the same walk down the same
// threshold tree (quant/cpu/blockwise.h: thresholds in Eytzinger order, node[1..255]).
//   float m = 0;  for (i...) m = absmax_step(m, x[i]);
//   uint8_t c = static_cast<uint8_t>(tree_code(tree.node, normalized(x[i], m)));
//   float back = decode(map, c, m);
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hostdevice.h"

namespace octet::quant {

// The running absmax after element x: |x| counts only when finite (false for NaN and inf).
OCTET_HD inline float absmax_step(float m, float x) {
  const float a = std::fabs(x);
  return a < INFINITY && m < a ? a : m;
}

// x / absmax in float (IEEE division, not a reciprocal); NaN (0/0 of an all-zero block, a NaN
// element) -> 0.
OCTET_HD inline float normalized(float x, float absmax) {
  const float v = x / absmax;
  return std::isnan(v) ? 0.0f : v;
}

// The code of a normalized value: k = 2k + (v > node[k]) for 8 levels from k = 1 ends at
// k = 256 + code, the number of thresholds below v.
OCTET_HD inline unsigned tree_code(const float* node, float v) {
  unsigned k = 1;
  for (int level = 0; level < 8; ++level) k = 2 * k + (v > node[k] ? 1u : 0u);
  return k - 256;
}

OCTET_HD inline float decode(const float* map, uint8_t code, float absmax) { return map[code] * absmax; }

}  // namespace octet::quant
