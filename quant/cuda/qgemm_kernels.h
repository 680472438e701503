// The per-thread arithmetic of the CUDA zero-point GEMM (quant/cuda/qgemm.cu), OCTET_HD so that the
// kernels and the host emulation (tests/quant/test_pbatch_cuda_emulation.cpp) run the same code; the
// emulation checks every element against qgemm_reference and the CPU's qlinear pieces bit for bit.
//
// Product: both operands become s8 (a u8 code c is c - 128, its zero point z - 128: (c - z) is
// unchanged), copied into rows of kp = k rounded up to 16 bytes (zeros past k, zero rows past n up to
// a multiple of 4), which is what cuBLASLt's int8 kernels take (quant/cuda/int8_gemm_lt.h); the
// weights are used in place when they already are such rows. The raw product
//   P[i][j] = sum_t a'[i][t] b'[j][t]   (|P| <= k 128^2 < 2^31 for k <= 33025)
// comes from cuBLASLt ("TN" with b' as its A, so that its column-major m x n output is our row-major
// [m][np]) or, where it has no kernel, from the DP4A tiles of quant/cuda/int8_dp4a.h (QgemmDp4aOps).
// Then one kernel folds the zero points in (qgemm_fold):
//   C = P - za' sum b' - zb' sum a' + k za' zb'   (in int64, wrapped to int32 like the CPU's int32)
// with sum a' and sum b' the shifted row sums (raw sums - 128 k for a u8 operand).
// Row quantizer (qlinear's activations): one block per row, the row's min and max (then
// choose_qparams' arithmetic, qg_row_params) and each element's u8 code (qg_code).
//   int32_t c = qg_fold(p, za[i], zb, sum_a[i], sum_b[j], k, ta == QType::u8, tb == QType::u8);
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/hostdevice.h"
#include "quant/qgemm.h"

namespace octet::quant::cuda::qg {

// Row length (bytes) of the s8 operand copies, and the multiple the weight rows are padded to.
inline constexpr int64_t kRowAlign = 16;
inline constexpr int64_t kRowsAlign = 4;
inline constexpr int kThreads = 256;

OCTET_HD inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The offset that makes a code of type `u8` signed: 128 for u8, 0 for s8.
OCTET_HD inline int32_t qg_offset(bool u8) { return u8 ? 128 : 0; }

// The raw code at byte i of an operand.
OCTET_HD inline int32_t qg_raw(const uint8_t* p, bool u8, int64_t i) {
  return u8 ? static_cast<int32_t>(p[i]) : static_cast<int32_t>(static_cast<int8_t>(p[i]));
}

// Element (r, t) of the s8 copy [rows_padded][kp] of an operand [rows][ld] (k columns): the shifted
// code, 0 past k or past rows.
OCTET_HD inline int8_t qg_padded(const uint8_t* src, int64_t rows, int64_t ld, int64_t k, bool u8, int64_t r,
                                 int64_t t) {
  if (r >= rows || t >= k) return 0;
  return static_cast<int8_t>(qg_raw(src, u8, r * ld + t) - qg_offset(u8));
}

// C from the raw s8 product p, the zero points and the raw row sums (as the operands' own types).
OCTET_HD inline int32_t qg_fold(int32_t p, int32_t za, int32_t zb, int32_t sum_a, int32_t sum_b, int64_t k, bool ua,
                                bool ub) {
  const int64_t za_s = static_cast<int64_t>(za) - qg_offset(ua), zb_s = static_cast<int64_t>(zb) - qg_offset(ub);
  const int64_t sa_s = static_cast<int64_t>(sum_a) - k * qg_offset(ua);
  const int64_t sb_s = static_cast<int64_t>(sum_b) - k * qg_offset(ub);
  const int64_t v = static_cast<int64_t>(p) - za_s * sb_s - zb_s * sa_s + k * za_s * zb_s;
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));  // modulo 2^32
}

// The DP4A tiles (quant/cuda/int8_dp4a.h) over the s8 copies: rows = m (a'), columns = n (b'), words
// of four codes along k; C [m][ldc].
struct QgemmDp4aOps {
  struct Groups {
    int64_t groups = 1;
  };
  Groups g;
  const int8_t* as8;  // a' [m][kp]
  const int8_t* bs8;  // b' [>= n][kp]
  int64_t m, n, kp;
  int32_t* c;
  int64_t ldc;
  OCTET_HD int64_t rows() const { return m; }
  OCTET_HD int64_t cols() const { return n; }
  OCTET_HD int64_t words() const { return kp / 4; }
  OCTET_HD static int32_t word(const int8_t* p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const int32_t*>(p);  // kp is a multiple of 16: aligned
#else
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
#endif
  }
  OCTET_HD int32_t a_word(int64_t i, int64_t u) const { return word(as8 + i * kp + 4 * u); }
  OCTET_HD int32_t b_word(int64_t j, int64_t u) const { return word(bs8 + j * kp + 4 * u); }
  // The accessors int8_dp4a.h calls.
  OCTET_HD int32_t a(int64_t, int64_t i, int64_t u) const { return a_word(i, u); }
  OCTET_HD int32_t b(int64_t, int64_t u, int64_t j) const { return b_word(j, u); }
  OCTET_HD void store(int64_t, int64_t i, int64_t j, int32_t acc) const { c[i * ldc + j] = acc; }
};

// ---------------------------------------------------------------- row quantizer and output

// The (scale, zero point) of a row with bounds [lo, hi]: choose_qparams(lo, hi, QType::u8)'s
// arithmetic step by step (quant/qgemm.cpp: the range widened to hold 0 in double, the scale rounded
// to float, at least the smallest positive float, the zero point from the float scale in double).
// A row with a NaN or an infinity gets scale NaN and zero point 0 (cpu::quantize_rows_u8).
struct QgRowParams {
  float scale;
  int32_t zero_point;
};
OCTET_HD inline QgRowParams qg_row_params(float lo, float hi) {
  if (!(std::isfinite(lo) && std::isfinite(hi))) return {std::numeric_limits<float>::quiet_NaN(), 0};
  const double l = static_cast<double>(lo) < 0.0 ? static_cast<double>(lo) : 0.0;  // std::min(0.0, lo)
  const double h = 0.0 < static_cast<double>(hi) ? static_cast<double>(hi) : 0.0;  // std::max(0.0, hi)
  if (l == h) return {1.0f, 0};
  float scale = static_cast<float>((h - l) / 255.0);
  if (!(scale > 0.0f)) scale = std::numeric_limits<float>::denorm_min();
  double z = std::nearbyint(0.0 - l / static_cast<double>(scale));
  z = z < 0.0 ? 0.0 : (z > 255.0 ? 255.0 : z);
  return {scale, static_cast<int32_t>(z)};
}

// quantize_value(x, {scale, zero_point, u8}): clamp(nearbyint(x / scale) + zero_point, 0, 255) in
// float, NaN -> zero point; 0 in a row whose scale is NaN (cpu::quantize_rows_u8).
OCTET_HD inline uint8_t qg_code(float x, const QgRowParams& p) {
  if (std::isnan(p.scale)) return 0;
  if (std::isnan(x)) return static_cast<uint8_t>(p.zero_point);
  float r = std::nearbyint(x / p.scale) + static_cast<float>(p.zero_point);
  r = r < 0.0f ? 0.0f : (r > 255.0f ? 255.0f : r);
  return static_cast<uint8_t>(static_cast<int32_t>(r));
}

// y = float(acc) * (scale_a * w_scale) + bias[r] (float; no add without a bias).
OCTET_HD inline float qg_output(int32_t acc, float scale_a, float w_scale, const float* bias, int64_t r) {
  const float y = static_cast<float>(acc) * (scale_a * w_scale);
  return bias != nullptr ? y + bias[r] : y;
}

}  // namespace octet::quant::cuda::qg
