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
//   dw: GEMM dy . im2col(x)^T over large position blocks taken in order, each GEMM split across the
//     threads by tiles of the int32 accumulator; int64 beyond 2^17 positions.
//   Depthwise (groups == C, K = m*C): direct kernels with exact integer sums, in one of two layouts:
//     planes (quant/cpu/int8_depthwise.cpp), one long loop per tap over a zero-padded block of
//     samples (strides through phase planes); channels_last (quant/cpu/int8_depthwise_lanes.cpp),
//     vector lanes across 32 channels of one sample, no padded positions computed (sums in f32
//     lanes, exact below 2^24).
// Integer sums are exact, so no result depends on the thread count or the blocking.
//   cpu::int8_conv2d_forward(geom, xq, wq, sx * sw, bias, out);
#pragma once

#include <cstdint>
#include <string_view>

#include "core/kernels.h"
#include "core/norm_act.h"
#include "core/selector.h"

namespace octet::quant::cpu {

using kernels::Conv2dGeometry;

// The layout of the depthwise kernels; both give the same results bit for bit (exact integer sums):
//   planes         per channel, along zero-padded planes of a block of samples: long loops, but on
//                  small planes most of the work is padding (5/9 of it at 4x4 with 3x3 taps);
//   channels_last  lanes across channels; K == C and at most 1040 taps (R*S) only (a depthwise
//                  conv with K = m*C, m > 1, or more taps runs planes whatever the setting);
//   automatic      channels_last where K == C and the input plane has at most
//                  kDepthwiseLanesMaxPlane positions (kDepthwiseLanesMaxStridedPlane with a
//                  stride), planes beyond: measured on MobileNetV2's depthwise geometries on Zen 1
//                  (tools/bench/RESULTS.md, octet_bench_int8 --layouts): channels_last took 0.28-0.68x
//                  the planes time up to 14x14, 0.70-0.71x on 16x16 and 24x24 planes with stride 2,
//                  1.04-1.06x on them with stride 1, 1.05-1.57x from 32x32 up (0.91x at 28x28).
// Process-wide (core/selector.h), from OCTET_INT8_DEPTHWISE (auto, planes, channels_last) when not
// set; tests and benchmarks switch it.
enum class Int8DepthwiseLayout : uint8_t { automatic, planes, channels_last };
inline constexpr int64_t kDepthwiseLanesMaxPlane = 14 * 14, kDepthwiseLanesMaxStridedPlane = 24 * 24;
Selector<Int8DepthwiseLayout>& int8_depthwise_selector();
Int8DepthwiseLayout int8_depthwise_layout();
Int8DepthwiseLayout set_int8_depthwise_layout(Int8DepthwiseLayout layout);
// planes or channels_last: the layout the kernels run for depthwise geometry g under the setting.
Int8DepthwiseLayout depthwise_layout_for(const Conv2dGeometry& g);

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
