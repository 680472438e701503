// Unified INT8 training (Zhu et al., CVPR 2020; ../shared/papers/NOTES.md): symmetric per-tensor
// INT8 quantization of a layer's input, weight and output gradient. This header is the contract
// shared by the CPU kernels, the CUDA kernels, the autograd op (quant/int8_conv.h), the gradient
// clip search (DSGC) and the layers and trainer that use them.
//
// Definition (every implementation gives the same codes bit for bit):
//   clip c > 0 (finite), inv = 127.0f / c (one float division, on the host), y = x * inv (float);
//   y is clamped to [-127, 127] (so |x| > c saturates; -128 is never produced);
//   round to nearest (forward tensors): q = nearbyint(y), ties to even;
//   stochastic rounding (gradients):      q = min(floor(y + u), 127), u uniform in [0, 1) drawn for
//                                           element i from (seed, i) alone (sr_uniform), so a result
//                                           does not depend on threads or blocking, and the GPU draws
//                                           the same u (y + u is a float sum: 127 + u rounds to 128.0f
//                                           for u > 1 - 2^-18, hence the min);
//   NaN -> 0. Dequantized: x_hat = q * scale with scale = c / 127.0f (float).
// A tensor whose clip is 0 (all zeros) quantizes to zeros with scale 0.
// int8 x int8 products are accumulated in int32 and rescaled once: y = float(acc) * (sa * sb).
//   float c = int8_absmax(x);  float inv = int8_inv_scale(c);
//   int8_t q = int8_round_nearest(x[i], inv);           float back = q * int8_scale(c);
//   int8_t g = int8_round_stochastic(dy[i], inv, sr_uniform(seed, i));
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/generator.h"
#include "core/hostdevice.h"
#include "core/options.h"

namespace octet::quant {

inline constexpr float kInt8Max = 127.0f;

// ---- element functions (OCTET_HD: the CPU loops and the CUDA kernels call the same code)

// 127 / clip, or 0 for clip 0 (every code is then 0).
OCTET_HD inline float int8_inv_scale(float clip) { return clip > 0.0f ? kInt8Max / clip : 0.0f; }
// clip / 127: the value of one step.
OCTET_HD inline float int8_scale(float clip) { return clip / kInt8Max; }

OCTET_HD inline float int8_clamped(float x, float inv) {
  const float y = x * inv;
  if (std::isnan(y)) return 0.0f;
  return y < -kInt8Max ? -kInt8Max : (y > kInt8Max ? kInt8Max : y);
}

OCTET_HD inline int8_t int8_round_nearest(float x, float inv) {
  return static_cast<int8_t>(std::nearbyint(int8_clamped(x, inv)));
}

// u in [0, 1), but y + u is rounded to float: 127.0f + u == 128.0f once u > 1 - 2^-18, and
// casting 128 to int8 wraps to -128 (a saturated gradient would flip sign), so clamp again.
OCTET_HD inline int8_t int8_round_stochastic(float x, float inv, float u) {
  const float r = std::floor(int8_clamped(x, inv) + u);
  return static_cast<int8_t>(r < kInt8Max ? r : kInt8Max);
}

// The uniform draw of element i for stochastic rounding: one Philox4x32 block per four elements
// (core/generator.h), word i % 4 of block i / 4, 24 random bits.
OCTET_HD inline float sr_uniform(uint64_t seed, uint64_t i) { return uniform_float(philox_at(seed, 0, i >> 2)[i & 3]); }

// ---- per-layer configuration and telemetry

// DCLR's beta: a factor in (0, 1].
inline constexpr OptionRange kDclrBetaRange{0.0, 1.0, true, false, "in (0, 1]"};

// What an INT8 layer does, declared once (core/options.h): the recipe keys quant.<name>, their
// defaults, ranges and documentation come from this list (tools/train/recipe.cpp).
//   Int8Config().dsgc(false).clip_update_period(50);
#define OCTET_INT8_OPTIONS(X)                                                                                       \
  X(bool, dsgc, true, ::octet::kAnyValue,                                                                           \
    "gradient clip by the cosine-distance search (DSGC); false: clip = max|gradient|")                              \
  X(int64_t, clip_update_period, 100, ::octet::kAtLeastOne, "backward passes between two DSGC searches")            \
  X(bool, clip_relative, false, ::octet::kAnyValue,                                                                 \
    "between two DSGC searches, scale the searched clip with the gradient (clip = its ratio to max|gradient| at "   \
    "the search times max|gradient| now); false: the searched clip itself, as the paper")                           \
  X(bool, stochastic_rounding, true, ::octet::kAnyValue,                                                            \
    "stochastic rounding of the INT8 gradients (forward tensors always round to nearest); false: round to nearest") \
  X(bool, dclr, true, ::octet::kAnyValue,                                                                           \
    "scale each INT8 layer's lr by max(exp(-dclr_alpha * d_c), dclr_beta), d_c its gradient's cosine distance")     \
  X(double, dclr_alpha, 20.0, ::octet::kNonNegative, "DCLR decay rate alpha")                                       \
  X(double, dclr_beta, 0.1, ::octet::quant::kDclrBetaRange, "DCLR lower bound beta on the lr factor")               \
  X(double, cos_distance_warn, 0.1, ::octet::kNonNegative,                                                          \
    "warn when an INT8 layer's gradient cosine distance d_c rises above this")

struct Int8Config {
  OCTET_OPTIONS(Int8Config, OCTET_INT8_OPTIONS)
};

// What one INT8 layer saw in its latest forward and backward passes; the op writes it, the
// optimizer's DCLR scale and the metrics read it, checkpoints save it (so a resume continues the
// same clip schedule and random draws).
struct Int8Stats {
  float input_clip = 0.0f, weight_clip = 0.0f;  // max|x|, max|w| of the latest forward
  float grad_clip = 0.0f;                       // the clip of the latest output gradient
  // 1 - cos(dy, dequantized dy) of the latest backward (NaN before the first backward)
  double cos_distance = std::numeric_limits<double>::quiet_NaN();
  int64_t backward_steps = 0;  // backward passes so far (DSGC runs when it is a multiple of the period)
  int64_t searches = 0;        // DSGC searches so far
  // clip / max|gradient| at the latest DSGC search, with config.clip_relative (0: none yet)
  float clip_ratio = 0.0f;
};

// The state an INT8 layer shares with its autograd nodes (a std::shared_ptr held by the layer):
// the backward pass reads the config and the seed and updates the stats.
struct Int8Layer {
  Int8Config config;
  Int8Stats stats;
  uint64_t seed = 0;  // stochastic rounding of backward pass t draws from a seed mixed from (seed, t)
};

// DCLR's learning-rate factor phi(d_c) = max(exp(-alpha * d_c), beta). A NaN d_c is a gradient
// with non-finite values (quant/int8_conv.h): the largest deviation there is, so beta.
inline double dclr_scale(double cos_distance, double alpha, double beta) {
  if (std::isnan(cos_distance)) return beta;
  const double s = std::exp(-alpha * cos_distance);
  return s > beta ? s : beta;
}

// A layer's DCLR factor now: 1 with DCLR off or before its first backward pass (whose d_c is the
// NaN the stats start with, not a divergence), else dclr_scale of its latest d_c.
inline double dclr_scale(const Int8Layer& l) {
  if (!l.config.dclr_ || l.stats.backward_steps == 0) return 1.0;
  return dclr_scale(l.stats.cos_distance, l.config.dclr_alpha_, l.config.dclr_beta_);
}

}  // namespace octet::quant
