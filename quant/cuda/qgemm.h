// The CUDA half of the zero-point GEMM (definition in quant/qgemm.h; quant/qgemm.cpp calls these for
// CUDA tensors): the int8 product by cuBLASLt (s8 x s8 -> s32, CUBLAS_COMPUTE_32I; u8 operands
// shifted by 128 with their zero points) or, where cuBLASLt has no kernel for the shape (m not a
// multiple of 4, ...), a DP4A kernel, then one kernel folding in the zero-point terms. The same int32
// sums as the CPU. Operands contiguous, on the current device. Pure C++ declarations.
//   Tensor acc = cuda::qgemm(a, za, QType::u8, b, /*zb=*/0, QType::s8, b_row_sums);   // i32 [m, n]
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quant/qgemm.h"

namespace octet::quant::cuda {

// The raw product's kernel: cuBLASLt where it has one for the shape, else DP4A (automatic), or DP4A
// always (tests: the fallback gives the same sums).
enum class QgemmPath : uint8_t { automatic, dp4a };
// a [m, k] codes (u8 tensor for QType::u8, i8 for s8), za i32 [m]; b [n, k] codes, b_row_sums i32 [n]
// (sum of b's raw codes per row; undefined: computed) -> i32 [m, n] = sum_k (a - za)(b - zb).
Tensor qgemm(const Tensor& a, const Tensor& za, QType ta, const Tensor& b, int32_t zb, QType tb,
             const Tensor& b_row_sums, QgemmPath path = QgemmPath::automatic);
// x f32 [batch, cols] -> u8 codes [batch, cols] and per-row (scale f32 [batch], zero point i32 [batch]),
// each row's parameters from its (min, max) by choose_qparams.
struct RowQuantized {
  Tensor codes, scale, zero_point;
};
RowQuantized quantize_rows_u8(const Tensor& x);
// y f32 [batch, rows] = float(acc) * (scale_a[b] * w_scale) + bias.
Tensor dequantize_linear(const Tensor& acc, const Tensor& scale_a, float w_scale, const Tensor& bias);

}  // namespace octet::quant::cuda
