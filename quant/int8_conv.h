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
//   clip: config.dsgc_: dsgc_search(dy) when t % config.clip_update_period_ == 0 (so at t = 0), or
//         when the stored clip is 0 or not finite (an all-zero or diverged gradient at the search
//         step would otherwise zero or poison the next period); the stored stats.grad_clip in
//         between. With config.clip_relative_ the search also stores stats.clip_ratio = clip /
//         max|dy| and the steps in between use clip_ratio * max|dy| (float product), so the clip
//         follows the gradient's scale (a short last batch, a warm-up); a ratio that is 0 or not
//         finite makes the step search. Without dsgc: max|dy| every step.
//   rounding: stochastic with seed int8_backward_seed(layer->seed, t) if
//         config.stochastic_rounding_, else to nearest;
// stats.cos_distance = d_c of the codes actually used, grad_clip = the clip, backward_steps + 1
// (searches + 1 when it searched). Then dx = conv-transpose(q(dy), q(w)) * (sdy * sw) and
// dw = q(dy) x im2col(q(x)) * (sdy * sx), from the int8 codes kept by the forward (on the CPU
// x's codes, a quarter of its floats; the float x is not kept); the bias gradient is the
// per-channel sum of the float dy, accumulated in double (on the CPU by the same pass that
// quantizes dy).
// A non-finite dy makes dx and dw NaN (d_c NaN) rather than being quantized to silent zeros.
// The quantization happens only for gradients someone needs: if neither x nor w requires grad,
// the backward only sums dy for the bias and leaves the stats alone.
// f32, NCHW, any stride/padding/dilation/groups; depthwise convs (groups == C, K = m*C) run
// direct int8 kernels. Devices: CPU (quant/cpu/int8_conv.h) and CUDA (quant/cuda/int8_conv.h, in
// builds with the CUDA backend), with the same results bit for bit given the same codes (integer
// sums are exact; the CUDA codes are the CPU's); only the bias gradient and the cosine statistics
// are sums of floats, in double in another order (they agree to double rounding; so can a DSGC
// clip, except where two search points' d_c tie to double rounding). On CUDA the
// forward keeps x itself instead of its codes (its kernels quantize x as they load it, the paper's
// fused quantize+conv) and waits once for the two clips; the backward waits once, for d_c, after
// its kernels are queued (and a DSGC search waits per evaluation).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "core/norm_act.h"
#include "core/ops/conv.h"
#include "core/selector.h"
#include "core/tensor.h"
#include "quant/int8.h"

namespace octet::quant {

// x [N,C,H,W], w [K,C/g,R,S], bias [K] or undefined -> [N,K,P,Q] (as conv2d). `layer` must not be
// null; its config is read and its stats written by the forward and the backward.
Tensor int8_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opts,
                   const std::shared_ptr<Int8Layer>& layer);

// The INT8 convolution of act(batch_norm(z)) in training mode -- conv -> BN -> ReLU/ReLU6 -> INT8
// conv, as in MobileNetV2 and ResNet -- with the quantization of its input fused into the batch
// norm (the paper's fused quantize-conv, with the producer): the normalization's output pass writes
// the convolution's int8 codes and their clip straight from z, and the float activation is never
// written or read (quant/cpu/int8_bn_quant.cpp, batch_norm_act_codes, says why the clip is known
// beforehand). The backward keeps what the two ops keep: z and the statistics for the batch norm,
// the int8 codes for the convolution.
// Bit for bit the same as
//   int8_conv2d(batch_norm(z, {.running_mean = bn.running_mean, .running_var = bn.running_var,
//                              .weight = bn.weight, .bias = bn.bias, .training = true,
//                              .momentum = bn.momentum, .eps = bn.eps, .act = bn.act}),
//               w, bias, opts, layer)
// -- output, running statistics, the layer's stats and every gradient (z, bn.weight, bn.bias, w,
// bias) -- and on other devices than the CPU (or for a z that is not f32) it is that composition.
struct BatchNormArgs {
  Tensor running_mean, running_var, weight, bias;  // [C] each, any of them undefined
  double momentum = 0.1, eps = 1e-5;
  NormActivation act = NormActivation::none;
};
Tensor int8_conv2d_batch_norm(const Tensor& z, const BatchNormArgs& bn, const Tensor& w, const Tensor& bias,
                              const Conv2dOptions& opts, const std::shared_ptr<Int8Layer>& layer);

// Whether INT8 layers fuse the batch norm in front of them (layers/sequential.h, models/resnet.h
// call int8_conv2d_batch_norm where it applies): on unless set off or OCTET_INT8_FUSE_BN=off.
// Results are the same either way; the setting is for tests and benchmarks. set_ returns the
// previous setting.
enum class Int8BnFusion : uint8_t { off, on };
Selector<Int8BnFusion>& int8_bn_fusion_selector();
bool int8_bn_fusion();
Int8BnFusion set_int8_bn_fusion(Int8BnFusion fusion);

// The CUDA kernel paths of int8_conv2d (quant/cuda/int8_conv.h; the CPU has one set of kernels and
// ignores this). Every path gives the same results bit for bit, so the choice is about speed only:
//   dp4a         DP4A implicit GEMM, x quantized inside its loads (the paper's kernel);
//   tensor_core  int8 im2col + cuBLASLt int8 GEMM on the integer tensor cores;
//   direct       depthwise convolutions only: one thread per output element;
//   automatic    per geometry and product (forward, dx, dw), the first call times the candidates
//                (depthwise: direct; others: tensor_core and dp4a) and keeps the fastest for the
//                rest of the process, as the paper picks im2col+GEMM or implicit GEMM per layer
//                before training.
// A forced path that cannot run a geometry (direct on a non-depthwise conv, or a GEMM shape
// cuBLASLt has no algorithm for) falls back to the automatic choice there. The initial setting comes
// from the environment variable OCTET_INT8_CONV_PATH (auto, dp4a, tensor_core or direct; unset:
// auto); tests and benchmarks switch it with set_int8_conv_path.
enum class Int8ConvPath : uint8_t { automatic, dp4a, tensor_core, direct };

// The setting (core/selector.h), and shorthands for its name, parse, active and set.
Selector<Int8ConvPath>& int8_conv_selector();
std::string_view int8_conv_path_name(Int8ConvPath path);  // "auto", "dp4a", "tensor_core", "direct"
// The path a name (as int8_conv_path_name, or "automatic") stands for; an octet::Error otherwise.
Int8ConvPath parse_int8_conv_path(std::string_view name);
// Process-wide; set_int8_conv_path returns the previous setting.
Int8ConvPath int8_conv_path();
Int8ConvPath set_int8_conv_path(Int8ConvPath path);
// The paths that ran last for the forward, dx and dw of this convolution's geometry on x's CUDA
// device: the forced one, or where it could not run (and when none is forced) the automatic choice;
// "auto" for a product that has not run, on the CPU, and in builds without CUDA.
std::array<Int8ConvPath, 3> int8_conv_last_paths(const Tensor& x, const Tensor& w, const Conv2dOptions& opts);

}  // namespace octet::quant
