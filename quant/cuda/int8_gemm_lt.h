// int8 x int8 -> int32 GEMM on the GPU's integer tensor cores through cuBLASLt (IMMA), the
// tensor-core path of the CUDA INT8 convolution. Pure C++ declarations: no CUDA headers here.
//   C[j*ldc + i] = sum_t A[i*lda + t] * B[j*ldb + t]   (i < m, j < n, t < k; ops::Int8Gemm)
// i.e. cuBLASLt's column-major D = op(A) op(B) with A transposed and B not ("TN": the only regular
// layout its int8 kernels take), A and B CUDA_R_8I, C CUDA_R_32I, compute CUBLAS_COMPUTE_32I with
// int32 alpha = 1, beta = 0: exact integer sums (callers keep them below 2^31). cuBLASLt's
// requirements for int8 in this layout, which the callers meet by padding: m, k and the leading
// dimensions multiples of 4 (the callers use 16), pointers 4-byte aligned (16 here: algorithms are
// asked for with a 16-byte minimum alignment of every operand).
//   if (int8_gemm_supported(g)) int8_gemm(g, a, b, c);
#pragma once

#include <cstdint>

#include "quant/cuda/int8_conv_ops.h"

namespace octet::quant::cuda {

// Whether cuBLASLt has an algorithm for this shape on the current device (asked once per shape and
// device, then cached with its descriptors). False for shapes breaking the rules above.
bool int8_gemm_supported(const ops::Int8Gemm& g);

// Runs the GEMM on the current stream; an octet::Error when the shape is not supported.
void int8_gemm(const ops::Int8Gemm& g, const int8_t* a, const int8_t* b, int32_t* c);

}  // namespace octet::quant::cuda
