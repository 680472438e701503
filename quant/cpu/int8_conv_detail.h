// Pieces shared by the CPU INT8 convolution kernels (quant/cpu/int8_conv.cpp: im2col + GEMM;
// quant/cpu/int8_depthwise.cpp: direct depthwise kernels). Internal to quant/cpu/.
//   for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) { ... });
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/kernels.h"
#include "core/cpu/isa.h"

namespace octet::quant::cpu::detail {

using kernels::Conv2dGeometry;

// Output positions o in [lo, hi) whose input index o*stride + base falls inside [0, limit).
OCTET_SIMD_INLINE void valid_range(int64_t base, int64_t stride, int64_t limit, int64_t out_len, int64_t& lo,
                                   int64_t& hi) {
  lo = base >= 0 ? 0 : (-base + stride - 1) / stride;
  const int64_t last = limit - 1 - base;
  hi = last < 0 ? 0 : std::min(out_len, last / stride + 1);
  lo = std::min(lo, hi);
}

// fn(p, ih, iw0, q_lo, q_hi) for each output row p of tap (r, s) whose input row ih is inside the
// image; output columns [q_lo, q_hi) read input column iw0 + q*stride_w.
template <typename Fn>
OCTET_SIMD_INLINE void for_tap_rows(const Conv2dGeometry& g, int64_t r, int64_t s, Fn fn) {
  int64_t q_lo, q_hi;
  const int64_t iw0 = s * g.dil_w - g.pad_w;
  valid_range(iw0, g.stride_w, g.w, g.q, q_lo, q_hi);
  for (int64_t p = 0; p < g.p; ++p) {
    const int64_t ih = p * g.stride_h - g.pad_h + r * g.dil_h;
    if (ih >= 0 && ih < g.h) fn(p, ih, iw0, q_lo, q_hi);
  }
}

// out[i] = float(acc[i]) * scale + bias. Inline, so that it is compiled into each per-ISA kernel
// (OCTET_SIMD_CLONES) that calls it: a dispatched call per short row would cost more than the row.
OCTET_SIMD_INLINE void rescale_run(const int32_t* acc, int64_t n, float scale, float bias, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(acc[i]) * scale + bias;
}

// Products of two codes in [-127, 127] an int32 sum can always hold: 2^17 * 127^2 < 2^31.
inline constexpr int64_t kMaxInt32Terms = int64_t{1} << 17;

inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_item));
}

inline bool is_depthwise(const Conv2dGeometry& g) { return g.groups == g.c && g.groups > 1 && g.k % g.c == 0; }

// Depthwise kernels (groups == C, K = m*C); codes channel-major as in quant/cpu/int8_conv.h.
void depthwise_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias,
                       float* out);
void depthwise_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx);
void depthwise_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw);

}  // namespace octet::quant::cpu::detail
