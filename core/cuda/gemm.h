// Row-major strided-batched GEMM on device pointers (cuBLAS), for CUDA kernels built from GEMMs
// (core/cuda/attention.cu): for each batch index n,
//   C_n = alpha op(A_n) op(B_n) + beta C_n,  X_n = X + n * stride_X,
// with leading dimensions as cuda::gemm (core/cuda/gemm.cpp), which is its one-batch case. f32 runs
// in exact FP32 unless cuda::allow_tf32(); f64 in FP64; bf16 means bf16 A and B with an f32 C
// (or, with bf16_c, a bf16 C rounded once from the sums), accumulated in f32 (tensor cores). Pure
// C++: no CUDA headers.
//   gemm_batched(DType::f32, dev, false, true, m, n, k, 1.0, {q, d, tq * d}, {k, d, tk * d}, 0.0, {s, n, m * n}, bh);
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace octet::cuda {

// One operand: its data, leading dimension and the elements between consecutive batch entries.
struct BatchOperand {
  const void* data;
  int64_t ld, stride;
};

// C is written through c.data. K = 0 gives C = beta C, as BLAS defines it.
void gemm_batched(DType dtype, Device device, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  BatchOperand a, BatchOperand b, double beta, BatchOperand c, int64_t batch, bool bf16_c = false);

}  // namespace octet::cuda
