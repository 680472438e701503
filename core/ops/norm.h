// Normalization ops, forward and backward: layer_norm and batch_norm (one fused kernel each way,
// batch norm optionally with the activation and a residual after it).
//   Tensor y = layer_norm(x, {512}, w, b);
//   Tensor z = batch_norm(x, {.running_mean = rm, .running_var = rv, .weight = w, .bias = b, .training = true});
#pragma once

#include "core/norm_act.h"
#include "core/tensor.h"

namespace octet {

// Normalizes over the trailing `normalized_shape` dims; weight/bias (optional) have that shape. On
// the CPU one fused kernel each way (statistics summed in double; bf16 input computed in f32 and
// the output rounded once); on CUDA composed of autograd ops, as layer_norm_reference.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// The same, composed of autograd ops (mean, subtract, rsqrt, ...): the fused kernels' reference.
Tensor layer_norm_reference(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                            const Tensor& bias = Tensor(), double eps = 1e-5);

// What batch_norm does besides normalizing x [N, C, ...]. The per-channel tensors are [C] each,
// any of them undefined, except that evaluation needs both running statistics.
struct BatchNormOptions {
  Tensor running_mean{}, running_var{};  // updated in place while training (if defined)
  Tensor weight{}, bias{};               // the affine transform after the normalization
  bool training = false;                 // batch statistics (true) or the running ones (false)
  double momentum = 0.1, eps = 1e-5;
  // relu/relu6: act(batch_norm(...)) in one op, the same bits
  NormActivation act = NormActivation::none;
  Tensor residual{};  // x's shape: act(batch_norm(...) + residual) in one op, the same bits
};

// In training, normalizes with the batch statistics and updates running_mean / running_var in
// place (if defined): r = (1 - momentum) r + momentum * stat, with the unbiased variance, as
// PyTorch. In evaluation, normalizes with the running statistics.
// With an activation, training keeps no activation for the backward (core/norm_act.h), so a
// following INT8 convolution's float input is freed after its forward. The residual serves the
// residual blocks of ResNet and MobileNetV2; the backward keeps it only where an activation follows.
Tensor batch_norm(const Tensor& x, const BatchNormOptions& options);

// Pieces of batch_norm's training path, for an op that fuses batch norm with its consumer (the
// INT8 convolution's fused quantize, quant/int8_conv.h) and must give batch_norm's bits:
// running_mean / running_var (both defined, or nothing happens) from the batch mean and invstd
// over `count` values per channel, as batch_norm updates them;
void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& invstd, int64_t count, double momentum, double eps);
// and the backward of act(batch_norm(x)) from its output gradient dout [N, C, S] (contiguous), x as
// [N, C, S] and the saved mean and invstd: dout masked by the activation (dout itself for none),
// and the gradients asked for (undefined otherwise).
struct BatchNormGrads {
  Tensor dout, dx, dweight, dbias;
};
BatchNormGrads batch_norm_act_backward(const Tensor& dout, const Tensor& x3, const Tensor& weight, const Tensor& bias,
                                       const Tensor& mean, const Tensor& invstd, NormActivation act, bool want_dx,
                                       bool want_dweight, bool want_dbias);

}  // namespace octet
