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

// Products of two codes a float sum holds exactly: 1040 * 127^2 < 2^24. The channels-last depthwise
// kernels sum at most this many terms in f32 lanes.
inline constexpr int64_t kExactTerms = 1040;

inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_item));
}

// Depthwise kernels (groups == C, K = m*C); codes channel-major as in quant/cpu/int8_conv.h.
void depthwise_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale, const float* bias,
                       float* out);
void depthwise_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale, float* dx);
void depthwise_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale, float* dw);
// The same in the channels-last layout (quant/cpu/int8_depthwise_lanes.cpp), for K == C and
// R*S <= kExactTerms only. A block of kLanes channels is held as floats [position][kLanes].
void depthwise_lanes_forward(const Conv2dGeometry& g, const int8_t* x, const int8_t* w, float scale,
                             const float* bias, float* out);
void depthwise_lanes_backward_input(const Conv2dGeometry& g, const int8_t* dy, const int8_t* w, float scale,
                                    float* dx);
void depthwise_lanes_backward_weight(const Conv2dGeometry& g, const int8_t* x, const int8_t* dy, float scale,
                                     float* dw);
inline constexpr int64_t kLanes = 32;
// dst[i][j] = src[j*stride + i] (i < len) for lanes j < cw, 0 for the others: codes of channels in
// planes `stride` apart into lanes. The active ISA's version; _tail: positions [i0, len) in plain
// loops (the portable version, and the AVX2 version's tails).
void to_lanes(const int8_t* src, int64_t stride, int64_t cw, int64_t len, float* dst);
void to_lanes_tail(const int8_t* src, int64_t stride, int64_t cw, int64_t i0, int64_t len, float* dst);
// dst[j*stride + i] = src[i][j] * scale + bias[j] (bias null: + 0.0f) for lanes j < cw, i < len; the
// _tail version for lanes [j0, cw) and positions [i0, len).
void from_lanes(const float* src, int64_t len, int64_t cw, float scale, const float* bias, float* dst,
                int64_t stride);
void from_lanes_tail(const float* src, int64_t i0, int64_t len, int64_t j0, int64_t cw, float scale,
                     const float* bias, float* dst, int64_t stride);
// out[j * ldo + k] = float(y[k * ny + j]) * scale + bias[k] (bias null: + 0.0f) for rows k in
// [k0, k1) and positions j in [j0, j1): a GEMM's int32 sums [K, positions] rescaled into the
// output's [positions, K] rows (a Linear's), in plain loops.
void rescale_transposed(const int32_t* y, int64_t ny, int64_t j0, int64_t j1, int64_t k0, int64_t k1, float scale,
                        const float* bias, float* out, int64_t ldo);
#ifdef OCTET_CPU_X86
// 4x4 register blocks (quant/cpu/int8_depthwise_x86.cpp); call where the CPU has AVX2.
void rescale_transposed_avx2(const int32_t* y, int64_t ny, int64_t j0, int64_t j1, int64_t k0, int64_t k1,
                             float scale, const float* bias, float* out, int64_t ldo);
void to_lanes_avx2(const int8_t* src, int64_t stride, int64_t cw, int64_t len, float* dst);
void from_lanes_avx2(const float* src, int64_t len, int64_t cw, float scale, const float* bias, float* dst,
                     int64_t stride);
#endif

}  // namespace octet::quant::cpu::detail
