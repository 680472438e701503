// AVX2-machine transposes of the channels-last depthwise kernels (quant/cpu/int8_depthwise_lanes.cpp):
// channel-major codes into lanes and lanes back into NCHW, in 4 channels x 4 positions register
// blocks; and the INT8 Linear's int32 sums [K, positions] rescaled into its [positions, K] rows
// (rescale_transposed). 128-bit blocks, not 8x8 in 256-bit registers: an 8x8 transpose needs
// lane-crossing permutes (vperm2f128: 8 micro-ops on Zen 1), and a 4x4 block stores its rows as
// they are. Same values as the plain loops (to_lanes_tail, from_lanes_tail, rescale_transposed),
// which also take the tails: a code widened to f32 (or an int32 sum to f32) is rounded the same
// way, and the rescale is the same multiply, then add, of the same floats (no FMA).
#include "quant/cpu/int8_conv_detail.h"

#ifdef OCTET_CPU_X86

#include <immintrin.h>

#include <cstring>

namespace octet::quant::cpu::detail {

OCTET_TARGET_AVX2 void to_lanes_avx2(const int8_t* src, int64_t stride, int64_t cw, int64_t len, float* dst) {
  const int64_t len4 = len / 4 * 4, cw4 = cw / 4 * 4;
  for (int64_t i = 0; i < len4; i += 4) {
    for (int64_t j0 = 0; j0 < cw4; j0 += 4) {
      __m128 r[4];  // r[k]: channel j0 + k at positions i .. i + 3
      for (int k = 0; k < 4; ++k) {
        int32_t four;
        std::memcpy(&four, src + (j0 + k) * stride + i, sizeof four);
        r[k] = _mm_cvtepi32_ps(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(four)));
      }
      _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);  // r[k]: position i + k, channels j0 .. j0 + 3
      for (int k = 0; k < 4; ++k) _mm_storeu_ps(dst + (i + k) * kLanes + j0, r[k]);
    }
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t j = cw4; j < kLanes; ++j) dst[(i + k) * kLanes + j] = j < cw ? src[j * stride + i + k] : 0.0f;
  }
  to_lanes_tail(src, stride, cw, len4, len, dst);
}

OCTET_TARGET_AVX2 void from_lanes_avx2(const float* src, int64_t len, int64_t cw, float scale, const float* bias,
                                       float* dst, int64_t stride) {
  const int64_t len4 = len / 4 * 4, cw4 = cw / 4 * 4;
  const __m128 s = _mm_set1_ps(scale);
  for (int64_t j0 = 0; j0 < cw4; j0 += 4) {
    __m128 b[4];
    for (int k = 0; k < 4; ++k) b[k] = _mm_set1_ps(bias ? bias[j0 + k] : 0.0f);
    for (int64_t i = 0; i < len4; i += 4) {
      __m128 r[4];  // r[k]: position i + k, channels j0 .. j0 + 3
      for (int k = 0; k < 4; ++k) r[k] = _mm_loadu_ps(src + (i + k) * kLanes + j0);
      _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);  // r[k]: channel j0 + k at positions i .. i + 3
      for (int k = 0; k < 4; ++k) _mm_storeu_ps(dst + (j0 + k) * stride + i, _mm_add_ps(_mm_mul_ps(r[k], s), b[k]));
    }
  }
  from_lanes_tail(src, 0, len4, cw4, cw, scale, bias, dst, stride);
  from_lanes_tail(src, len4, len, 0, cw, scale, bias, dst, stride);
}

OCTET_TARGET_AVX2 void rescale_transposed_avx2(const int32_t* y, int64_t ny, int64_t j0, int64_t j1, int64_t k0,
                                               int64_t k1, float scale, const float* bias, float* out, int64_t ldo) {
  const int64_t k4 = k0 + (k1 - k0) / 4 * 4, j4 = j0 + (j1 - j0) / 4 * 4;
  const __m128 s = _mm_set1_ps(scale);
  for (int64_t k = k0; k < k4; k += 4) {
    const __m128 b = bias ? _mm_loadu_ps(bias + k) : _mm_setzero_ps();
    for (int64_t j = j0; j < j4; j += 4) {
      __m128 r[4];  // r[i]: row k + i at positions j .. j + 3
      for (int i = 0; i < 4; ++i)
        r[i] = _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + (k + i) * ny + j)));
      _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);  // r[i]: position j + i, rows k .. k + 3
      for (int i = 0; i < 4; ++i) _mm_storeu_ps(out + (j + i) * ldo + k, _mm_add_ps(_mm_mul_ps(r[i], s), b));
    }
  }
  rescale_transposed(y, ny, j4, j1, k0, k4, scale, bias, out, ldo);  // the positions past the blocks
  rescale_transposed(y, ny, j0, j1, k4, k1, scale, bias, out, ldo);  // the rows past them
}

}  // namespace octet::quant::cpu::detail

#endif  // OCTET_CPU_X86
