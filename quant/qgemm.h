// Standard quantized inference, the baseline PrecisionBatching is measured against
// (../shared/papers/uint8-gemm-with-offsets.md): affine uint8/int8 codes with per-tensor scales and
// zero points, real = scale * (q - zero_point), multiplied in integers with the offsets folded in as
// bias terms, and requantized with a fixed-point multiplier and shift. This header is the contract
// of the CPU (VNNI) and CUDA (cuBLASLt int8) implementations; they give the same int32 sums.
//
//   sum_K (a - za)(b - zb) = sum_K a b - za sum_K b - zb sum_K a + K za zb
// so an int8 GEMM of the raw codes plus row and column sums gives it exactly. u8 and s8 operands
// reduce to one u8 x s8 core (vpdpbusd's): an s8 a is (a + 128) with za + 128, a u8 b is (b - 128)
// with zb - 128.
// Requantization to an output with (scale_c, zero_c): c = clamp(zero_c + round(acc * M)), with
// M = scale_a scale_b / scale_c as a Q31 multiplier m in [2^30, 2^31) and an exponent e,
// M ~ m 2^(e - 31): round(acc * M) = rounding_shift(rounding_doubling_high_mul(acc, m), -e)
// (gemmlowp's arithmetic: the high multiply rounds halves up, the shift rounds them away from zero,
// so a value can be rounded twice); within one unit of the real-valued acc * M. For e > 0 (M >= 1)
// acc is shifted left first (as TFLite does), saturating where acc 2^e leaves int32.
//
//   QLinearWeights w = qlinear_prepare(linear.weight_);       // int8, symmetric, per tensor
//   Tensor y = qlinear(w, x, linear.bias_);                    // x quantized to uint8 per row
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace octet::quant {

enum class QType : uint8_t { u8, s8 };
// The largest k whose sums of (a - za)(b - zb) always fit in int32: k * 255 * 255 < 2^31.
inline constexpr int64_t kQGemmMaxK = 33025;
int32_t qmin(QType t);  // 0 / -128
int32_t qmax(QType t);  // 255 / 127

struct QParams {
  float scale = 1.0f;  // > 0
  int32_t zero_point = 0;
  QType type = QType::u8;
};

// Parameters covering [min, max] widened to contain 0 (so real 0 has an exact code, as gemmlowp and
// PyTorch choose): scale = float((max - min) / (qmax - qmin)), zero_point = clamp(nearbyint(qmin -
// min / scale)), both evaluated in double (ties to even).
// symmetric: zero_point 0, scale = max(|min|, |max|) / 127 for s8 (so the codes of [min, max] stay
// in [-127, 127]: -128 is never produced for them) and / 255 for u8 (which then codes [0, max]).
// A zero range gives scale 1; a range so small its scale underflows, the smallest positive float.
// An Error for non-finite bounds or min > max.
QParams choose_qparams(float min, float max, QType type, bool symmetric = false);
// q = clamp(nearbyint(x / scale) + zero_point) (ties to even); NaN -> zero_point.
int32_t quantize_value(float x, const QParams& p);
// x [n] -> codes of p.type (uint8_t or int8_t array).
void quantize_array(const float* x, int64_t n, const QParams& p, void* q);

// int32 C[i, j] = sum_k (A[i, k] - za[i]) (B[j, k] - zb), i < m, j < n: A m x k row-major (lda >= k,
// codes of type ta) with a zero point per row (za), B n x k row-major (the weights' [out, in]
// layout, ldb >= k) with one zero point; C row-major (ldc >= n). Sums must fit in int32
// (k * 255 * 255 < 2^31, k <= 33025): an Error beyond. b_row_sums (sum_k B[j, k] of the raw codes,
// or null to compute) saves the weights' pass when they are constant.
void qgemm(int64_t m, int64_t n, int64_t k, QType ta, const void* a, int64_t lda, const int32_t* za, QType tb,
           const void* b, int64_t ldb, int32_t zb, int32_t* c, int64_t ldc, const int32_t* b_row_sums = nullptr);
// The plain loops, the reference every path is tested against.
void qgemm_reference(int64_t m, int64_t n, int64_t k, QType ta, const void* a, int64_t lda, const int32_t* za, QType tb,
                     const void* b, int64_t ldb, int32_t zb, int32_t* c, int64_t ldc);

// The fixed-point form of a real multiplier M in (0, 2^31): M ~ multiplier * 2^(exponent - 31).
struct QMultiplier {
  int32_t multiplier = 0;  // in [2^30, 2^31)
  int exponent = 0;
};
QMultiplier quantize_multiplier(double m);
// zero_point + round(acc * M) clamped to the type's range.
int32_t requantize(int32_t acc, const QMultiplier& m, int32_t zero_point, QType out);

// The int8 baseline of a Linear layer: weights int8, symmetric, per tensor (clip search as
// PrecisionBatching's weights: the clip among max|W| * i / 100 with the least squared error, or
// max|W|); activations uint8 with per-row dynamic (min, max) parameters; output float.
struct QLinearWeights {
  int64_t rows = 0, cols = 0;
  QParams w;        // s8, zero point 0
  Tensor codes;     // i8 [rows, cols]
  Tensor row_sums;  // i32 [rows]: sum_k codes[r, k]
  QLinearWeights to(Device d) const;
};
QLinearWeights qlinear_prepare(const Tensor& w, bool clip_search = true);
// y [batch, rows] = float(acc[b, r]) * (scale_a[b] * w.w.scale) + bias[r], all in float (the CPU and
// CUDA give the same bits), for x f32 [batch, cols]; on x's device. A row of x with a NaN or an
// infinity gives NaN outputs.
Tensor qlinear(const QLinearWeights& w, const Tensor& x, const Tensor& bias = Tensor());
// float64 reference from the dequantized operands (tests): f64 [batch, rows] on the CPU,
// sum_K (scale_a (a - za)) (scale_w q) + bias with the same activation codes as qlinear.
Tensor qlinear_reference(const QLinearWeights& w, const Tensor& x, const Tensor& bias = Tensor());

}  // namespace octet::quant
