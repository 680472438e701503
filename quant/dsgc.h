// Direction-sensitive gradient clipping (DSGC, Unified INT8 training; ../shared/papers/NOTES.md):
// the clip c of a gradient g is the one that minimizes the cosine distance
//   d_c(c) = 1 - cos(g, g_hat(c)),   g_hat(c) = dequant(quant(g, c)),
// over c in (0, max|g|]: a smaller clip resolves the bulk of g finer but saturates its outliers.
//   DsgcResult r = dsgc_search(dy);             // r.clip, r.cos_distance, r.evaluations
//   double d = cosine_distance(dy, r.clip);     // == r.cos_distance
//
// The search: d_c is cheap to evaluate (one pass over g, nothing written) but not smooth (codes
// jump as c moves) and not unimodal in general, so it starts with a coarse grid c_j = j*max|g|/G,
// j = 1..G (default G = 16), takes the best grid point and refines inside its bracket
// [c_{j-1}, c_{j+1}] by golden-section search (default 14 iterations, shrinking the bracket to
// 2/16 * 0.618^14 ~ 1.5e-4 of max|g|). It returns the best c of all points it evaluated, so never
// worse than the grid. Evaluations: G + iterations + 2 (32 by default; each one pass over g). The search quantizes with
// round-to-nearest, so it is deterministic (and thread-count independent: the sums run in fixed
// blocks); the INT8 conv then quantizes with stochastic rounding at the chosen clip and reports
// the d_c of what it actually used.
// Special cases: an all-zero g gives clip 0 and d_c 0; a g with a NaN or infinity gives
// clip = max|g| (NaN or inf) and d_c NaN without searching.
// Devices: the Tensor overloads run on the tensor's device -- the CPU, or CUDA in builds with the
// backend (quant/cuda/int8_quant.h: the same search points, each d_c from a device pass whose double
// sums add in another order, so a clip can differ from the CPU's only where two search points' d_c
// tie to double rounding); the pointer overloads read CPU memory.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quant/cosine_sums.h"
#include "quant/int8_tensor.h"

namespace octet::quant {

// 1 - cos(g, dequant(quant(g, clip))) of an f32 tensor, accumulated in double (each product is
// exact in double, sums in a fixed order); 0 for an all-zero g, 1 when g is not zero but every code
// is, NaN when g holds a NaN or infinity. Stochastic rounding draws sr_uniform(seed, i).
double cosine_distance(const Tensor& g, float clip, Int8Rounding rounding = Int8Rounding::nearest, uint64_t seed = 0);
double cosine_distance(const float* g, int64_t n, float clip, Int8Rounding rounding = Int8Rounding::nearest,
                       uint64_t seed = 0);

struct DsgcOptions {
  int64_t grid_points = 16;        // G: the coarse grid j * max|g| / G, j = 1..G
  int64_t golden_iterations = 14;  // refinements inside the best grid point's bracket
};

struct DsgcResult {
  float clip = 0.0f;
  double cos_distance = 0.0;  // d_c at `clip` (round-to-nearest)
  int64_t evaluations = 0;    // d_c evaluations (passes over g, besides the one for max|g|)
};

DsgcResult dsgc_search(const Tensor& g, const DsgcOptions& options = {});
DsgcResult dsgc_search(const float* g, int64_t n, const DsgcOptions& options = {});

}  // namespace octet::quant
