// Geometry helpers shared by the CPU convolution kernels, float (core/cpu/conv.cpp) and INT8
// (quant/cpu/int8_conv.cpp, int8_depthwise.cpp): which output positions of a kernel tap read
// inside the image, and the conv kinds that get their own paths. Internal to the CPU kernels.
//   for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) { ... });
// OCTET_SIMD_INLINE, so that the per-ISA kernel clones (core/cpu/isa.h) inline them.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cpu/isa.h"
#include "core/kernels.h"

namespace octet::cpu {

// Output positions o in [lo, hi) whose input index o*stride + base falls inside [0, limit).
OCTET_SIMD_INLINE void valid_range(int64_t base, int64_t stride, int64_t limit, int64_t out_len, int64_t& lo,
                                   int64_t& hi) {
  // o*stride + base >= 0  <=>  o >= ceil(-base / stride)
  lo = base >= 0 ? 0 : (-base + stride - 1) / stride;
  // o*stride + base <= limit - 1  <=>  o <= floor((limit - 1 - base) / stride)
  const int64_t last = limit - 1 - base;
  hi = last < 0 ? 0 : std::min(out_len, last / stride + 1);
  lo = std::min(lo, hi);
}

// The output rows of one kernel tap (r, s): fn(p, ih, iw0, q_lo, q_hi) for each output row p whose
// input row ih lies inside the image; output columns [q_lo, q_hi) read input column iw0 + q*stride_w.
template <typename Fn>
OCTET_SIMD_INLINE void for_tap_rows(const kernels::Conv2dGeometry& g, int64_t r, int64_t s, Fn fn) {
  int64_t q_lo, q_hi;
  const int64_t iw0 = s * g.dil_w - g.pad_w;
  valid_range(iw0, g.stride_w, g.w, g.q, q_lo, q_hi);
  for (int64_t p = 0; p < g.p; ++p) {
    const int64_t ih = p * g.stride_h - g.pad_h + r * g.dil_h;
    if (ih >= 0 && ih < g.h) fn(p, ih, iw0, q_lo, q_hi);
  }
}

// A 1x1, stride-1, unpadded conv: the input plane already is the column matrix (no im2col).
inline bool is_pointwise(const kernels::Conv2dGeometry& g) {
  return g.r == 1 && g.s == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0;
}

// groups == C > 1 with K = m*C: direct kernels, since im2col would make C tiny GEMMs.
inline bool is_depthwise(const kernels::Conv2dGeometry& g) {
  return g.groups == g.c && g.groups > 1 && g.k % g.c == 0;
}

}  // namespace octet::cpu
