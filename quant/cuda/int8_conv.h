// The CUDA half of the INT8 convolution op (quant/int8_conv.h calls these for CUDA tensors): the
// quantization of the operands, the three products by the path chosen per geometry
// (quant/cuda/int8_conv_paths.h: dp4a, tensor_core, direct; Int8ConvPath in quant/int8_conv.h),
// and the backward's statistics. The same results as the CPU's quant/cpu/int8_conv.h, bit for bit,
// for the same clips and seed. Operands contiguous, on the current device (the caller holds a
// DeviceGuard). Pure C++ declarations: no CUDA headers here.
//   auto clips = cuda::absmax_pair(x, w);
//   Tensor wq = cuda::int8_conv2d_forward(g, x, w, bias, clips[0], clips[1], out);
//   Int8ConvGrads gr = cuda::int8_conv2d_backward(g, dy, x, inv_x, wq, clip, rounding, seed, sx, sw,
//                                                 {true, true, false});
#pragma once

#include <array>
#include <cstdint>

#include "core/kernels.h"
#include "core/tensor.h"
#include "quant/cpu/int8_quant.h"
#include "quant/int8_conv.h"
#include "quant/kernels.h"  // Int8ConvGrads

namespace octet::quant::cuda {

using kernels::Conv2dGeometry;

// max|a| and max|b| (NaN / inf as int8_absmax), with one wait for both.
std::array<float, 2> absmax_pair(const Tensor& a, const Tensor& b);

// out [N,K,P,Q] = float(conv(q(x), q(w))) * (sx * sw) + bias, x and w quantized to nearest at
// clip_x and clip_w (x on load, by the chosen path's kernels); returns w's codes i8 [K,C/g,R,S].
Tensor int8_conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, float clip_x,
                           float clip_w, const Tensor& out);

struct Int8ConvWants {
  bool dx = false, dw = false, db = false;
};

// dy [N,K,P,Q] quantized at `clip` (channel-major codes, stochastic rounding drawing from `seed`),
// then dx = conv^T(q(dy), wq) * (sdy * sw), dw = q(dy) x im2col(q(x)) * (sdy * sx) with x's codes
// recomputed from x at inv_x, db = the per-channel sum of dy (double accumulation). x is needed for
// dw only, wq for dx only. A non-finite dy or clip makes dx and dw NaN.
Int8ConvGrads int8_conv2d_backward(const Conv2dGeometry& g, const Tensor& dy, const Tensor& x, float inv_x,
                                   const Tensor& wq, float clip, Int8Rounding rounding, uint64_t seed, float sx,
                                   float sw, Int8ConvWants wants);

// The paths that ran last for the forward, dx and dw of g on the current device (automatic where a
// product has not run); for tests, logs and benchmarks.
std::array<Int8ConvPath, 3> last_paths(const Conv2dGeometry& g);

}  // namespace octet::quant::cuda
