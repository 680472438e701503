// Direct 2-D convolution kernels (core/cuda/depthwise.cu): one thread per output (or input-gradient)
// element, no im2col and no library. Written for depthwise convolution (groups == C, K a multiple of
// C, so each output channel reads one input channel), where cuDNN's grouped convolution is slow;
// correct for any grouping, so conv.cpp also falls back to them where cuDNN cannot run a shape.
// Every element is computed by one thread in a fixed order and the weight gradient reduces in a
// fixed tree, so results are deterministic. Operands contiguous NCHW, f32 or f64, on one device.
//   if (is_depthwise(g)) direct_conv2d_forward(g, x, w, bias, out);
#pragma once

#include "core/kernels.h"

namespace octet::cuda {

inline bool is_depthwise(const kernels::Conv2dGeometry& g) { return g.groups == g.c && g.groups > 1 && g.k % g.c == 0; }

// x [N,C,H,W], w [K,C/g,R,S], bias [K] or undefined -> out [N,K,P,Q]
void direct_conv2d_forward(const kernels::Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                           const Tensor& out);
// dx [N,C,H,W] from w and dout [N,K,P,Q] (overwritten, not accumulated into)
void direct_conv2d_backward_data(const kernels::Conv2dGeometry& g, const Tensor& w, const Tensor& dout,
                                 const Tensor& dx);
// dw [K,C/g,R,S] from x and dout (overwritten)
void direct_conv2d_backward_weight(const kernels::Conv2dGeometry& g, const Tensor& x, const Tensor& dout,
                                   const Tensor& dw);
// out [N,K,PQ] += bias [K] broadcast over N and the plane (out f32, f64, or bf16 with an f32 bias:
// the sum in f32, rounded once).
void add_channel_bias(const Tensor& out, const Tensor& bias, int64_t n, int64_t k, int64_t pq);

}  // namespace octet::cuda
