// INT8-trained Linear layer (Unified INT8 training carried to the transformer's projections,
// ../shared/papers/NOTES.md): the differentiable op an INT8 Linear calls instead of linear.
//   auto layer = std::make_shared<quant::Int8Layer>();   layer->seed = 7;
//   Tensor y = quant::int8_linear(x, w, b, layer);        // x [..., in], w [out, in] -> [..., out]
//   y.backward(dy);   layer->stats.cos_distance;          // d_c of this backward's quantized gradient
//
// A Linear is a 1x1 convolution of its M = x.numel() / in rows ([M, in, 1, 1] * [out, in, 1, 1]),
// and this op is exactly that: the INT8 convolution's kernels (quant/int8_conv.h, the CPU's
// int8 GEMMs, the CUDA dp4a / cuBLASLt paths) with its clips, DSGC schedule, stochastic rounding and
// stats, on x, w and dy as they are laid out (no copy when they are contiguous). So
//   int8_linear(x, w, b, L) == int8_conv2d(x.reshape({M, in, 1, 1}), w.reshape({out, in, 1, 1}), b, {}, L)
// bit for bit -- output, gradients and L's stats -- with y = float(acc) * (sx * sw) + b from the
// exact int32 sums of the codes, dx and dw from the stochastically rounded codes of dy, and the
// bias gradient the float sum of dy over the rows (in double).
// x is f32 (a bf16 x, as autocast may pass, is taken up to f32 first: its gradient comes back
// bf16); w and bias f32 on x's device. An Error naming the op for a bad shape, dtype or device.
#pragma once

#include <memory>

#include "core/tensor.h"
#include "quant/int8.h"

namespace octet::quant {

Tensor int8_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const std::shared_ptr<Int8Layer>& layer);

}  // namespace octet::quant
