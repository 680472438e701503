// Pieces shared by the CPU INT8 convolution kernels (quant/cpu/int8_conv.cpp: im2col + GEMM;
// quant/cpu/int8_depthwise.cpp: direct depthwise kernels). Internal to quant/cpu/.
//   rescale_run(acc, n, scale, bias, out);   (tap geometry: core/cpu/conv_taps.h)
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cpu/conv_taps.h"
#include "core/cpu/isa.h"
#include "core/kernels.h"

namespace octet::quant::cpu::detail {

using kernels::Conv2dGeometry;

using octet::cpu::for_tap_rows;
using octet::cpu::is_depthwise;
using octet::cpu::is_pointwise;
using octet::cpu::valid_range;

// out[i] = float(acc[i]) * scale + bias. Inline, so that it is compiled into each per-ISA kernel
// (octet::cpu::simd_dispatch) that calls it: a dispatched call per short row would cost more than the row.
OCTET_SIMD_INLINE void rescale_run(const int32_t* acc, int64_t n, float scale, float bias, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(acc[i]) * scale + bias;
}

// Products of two codes in [-127, 127] an int32 sum can always hold: 2^17 * 127^2 < 2^31.
inline constexpr int64_t kMaxInt32Terms = int64_t{1} << 17;

inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_item));
}

// Depthwise kernels (groups == C, K = m*C); codes channel-major as in quant/cpu/int8_conv.h.
void depthwise_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias,
                       float* out);
void depthwise_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx);
void depthwise_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw);

}  // namespace octet::quant::cpu::detail
