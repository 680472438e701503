// Matrix products, forward and backward.
//   Tensor y = matmul(x, w.t());         // x [..., K], w [N, K] -> [..., N]
//   Tensor z = bmm(a, b);                // [B, M, K] x [B, K, N] -> [B, M, N]
//   Tensor o = linear(x, w, b);          // x [..., in], w [out, in], b [out]
#pragma once

#include "core/tensor.h"

namespace octet {

// a [M, K] x b [K, N] -> [M, N]. Transposed (and other strided) views go to the GEMM without a copy.
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// NumPy matmul: 1-D operands are promoted (and the added dim removed), batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace octet
