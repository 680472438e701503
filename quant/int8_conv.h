// INT8 convolution with INT8 backward (Unified INT8 training, ../shared/papers/NOTES.md): the
// differentiable op an INT8 Conv2d layer calls instead of conv2d.
//   auto layer = std::make_shared<quant::Int8Layer>();   layer->seed = 7;
//   Tensor y = quant::int8_conv2d(x, w, b, Conv2dOptions().padding(1), layer);
//   y.backward(dy);   layer->stats.cos_distance;   // d_c of this backward's quantized gradient
//
// Forward: clip_x = max|x|, clip_w = max|w| (stored in layer->stats); x and w are quantized with
// round-to-nearest (x straight into the channel-major codes the GEMMs read, one pass over the
// floats); int8 products accumulate in int32 and are rescaled once, y = float(acc) * (sx * sw),
// then + bias in float. So y equals a float convolution of the dequantized x and w up to float
// summation order.
// Backward t (t = layer->stats.backward_steps): the output gradient dy is quantized once, with
//   clip: config.dsgc: dsgc_search(dy) when t % config.clip_update_period == 0 (so at t = 0), or
//         when the stored clip is 0 or not finite (an all-zero or diverged gradient at the search
//         step would otherwise zero or poison the next period); the stored stats.grad_clip in
//         between. Without dsgc: max|dy| every step.
//   rounding: stochastic with seed int8_backward_seed(layer->seed, t) if
//         config.stochastic_rounding, else to nearest;
// stats.cos_distance = d_c of the codes actually used, grad_clip = the clip, backward_steps + 1
// (searches + 1 when it searched). Then dx = conv-transpose(q(dy), q(w)) * (sdy * sw) and
// dw = q(dy) x im2col(q(x)) * (sdy * sx), from the int8 codes kept by the forward (x's codes are
// a quarter of its floats; the float x is not kept); the bias gradient is the float sum of dy.
// A non-finite dy makes dx and dw NaN (d_c NaN) rather than being quantized to silent zeros.
// The quantization happens only for gradients someone needs: if neither x nor w requires grad,
// the backward only sums dy for the bias and leaves the stats alone.
// f32, NCHW, any stride/padding/dilation/groups; depthwise convs (groups == C, K = m*C) run
// direct int8 kernels. Device: CPU (quant/cpu/int8_conv.h); other devices are an octet::Error.
#pragma once

#include <memory>

#include "core/ops/conv.h"
#include "core/tensor.h"
#include "quant/int8.h"

namespace octet::quant {

// x [N,C,H,W], w [K,C/g,R,S], bias [K] or undefined -> [N,K,P,Q] (as conv2d). `layer` must not be
// null; its config is read and its stats written by the forward and the backward.
Tensor int8_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opts,
                   const std::shared_ptr<Int8Layer>& layer);

}  // namespace octet::quant
