// CPU kernels of the INT8 convolution (op and definition in quant/int8_conv.h). Operands are int8
// codes stored channel-major -- input x as [C,N,H,W], output gradient dy as [K,N,P,Q] (what
// cpu::quantize_transposed writes) -- so the positions (n, p, q) of one channel form a single
// row and any range of them is a block of columns a GEMM reads in place; weights stay
// [K,C/g,R,S]. Products accumulate in int32 (int64 across GEMM chunks for dw where the sum could
// leave int32) and are rescaled once: out = float(acc) * scale (+ bias[k]).
//   General convs: im2col of int8 codes into a per-thread block of positions (at most ~1 MB), one
//     int8 GEMM per group (quant/cpu/int8_gemm.h), rescale into NCHW; 1x1 stride-1 unpadded convs
//     skip im2col. Position blocks run in parallel with single-threaded GEMMs when there are
//     enough of them for every thread, else in order with threaded GEMMs.
//   dx: for stride 1 it is the forward conv of dy with the weights transposed and flipped (padding
//     dil*(R-1) - pad), so the same im2col + GEMM path serves and no int32 column matrix is
//     scattered; for stride > 1, per sample: GEMM W^T dy into int32 columns, col2im into an int32
//     plane, rescale.
//   dw: GEMM dy . im2col(x)^T per position block, summed over blocks.
//   Depthwise (groups == C, K = m*C): direct kernels with int32 plane accumulators.
// Integer sums are exact, so no result depends on the thread count or the blocking.
//   cpu::int8_conv2d_forward(geom, xq, wq, sx * sw, bias, out);
#pragma once

#include "core/kernels.h"

namespace octet::quant::cpu {

using kernels::Conv2dGeometry;

// xq i8 [C,N,H,W], wq i8 [K,C/g,R,S], bias f32 [K] or undefined -> out f32 [N,K,P,Q]. Contiguous.
void int8_conv2d_forward(const Conv2dGeometry& g, const Tensor& xq, const Tensor& wq, float scale, const Tensor& bias,
                         const Tensor& out);
// dyq i8 [K,N,P,Q], wq -> dx f32 [N,C,H,W].
void int8_conv2d_backward_input(const Conv2dGeometry& g, const Tensor& dyq, const Tensor& wq, float scale,
                                const Tensor& dx);
// xq i8 [C,N,H,W], dyq i8 [K,N,P,Q] -> dw f32 [K,C/g,R,S].
void int8_conv2d_backward_weight(const Conv2dGeometry& g, const Tensor& xq, const Tensor& dyq, float scale,
                                 const Tensor& dw);

}  // namespace octet::quant::cpu
