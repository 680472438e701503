// Operand checks shared by the CPU and CUDA kernels (core/cpu/, core/cuda/): shapes, contiguity
// and dtypes, which do not depend on the device. Each throws an octet::Error naming `op`.
//   check_rows({x, index, out}, "gather");   AdaptiveShape a = adaptive_shape(op, in, out);
#pragma once

#include <cstdint>
#include <initializer_list>

#include "core/kernels.h"

namespace octet::kernels {

// Every tensor is contiguous and 2-D.
void check_rows(std::initializer_list<Tensor> ts, const char* op);

// t is contiguous with `numel` elements (a pooling input or output, called `what`).
void check_plane_tensor(const char* op, const char* what, const Tensor& t, int64_t numel);

// Planes and spatial sizes of an adaptive-pooling pair [..., H, W] -> [..., P, Q].
struct AdaptiveShape {
  int64_t planes, h, w, p, q;
};
AdaptiveShape adaptive_shape(const char* op, const Tensor& in, const Tensor& out);

// Whether a kernel takes activations in channels-last memory too (core/memory_format.h), or
// contiguous NCHW only.
enum class ChannelsLast : bool { no, yes };
// An activation in a layout the kernel takes: contiguous, or channels-last where allowed.
bool in_kernel_layout(const Tensor& t, ChannelsLast allowed);

// Batch norm: x a [N, C, S] in a layout the kernel takes; each defined per-channel tensor
// contiguous [C] of x's opmath dtype (f32 for bf16 x: the statistics and parameters stay f32).
void check_bn(const char* op, const Tensor& x, std::initializer_list<Tensor> per_channel,
              ChannelsLast allowed = ChannelsLast::no);
// Tensors that share x's layout (a fused batch norm's residual, dout, dx), where defined: x's
// dtype, shape and strides.
void check_bn_like_x(const char* op, const Tensor& x, std::initializer_list<Tensor> like_x);

// Convolution input and weight: input in a layout the kernel takes, contiguous weight, one dtype,
// sizes matching the geometry.
void check_conv_operands(const char* op, const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                         ChannelsLast allowed = ChannelsLast::no);
// Convolution backward: dout [N,K,P,Q] and (where defined) dx in a layout the kernel takes, dw
// contiguous, of x's dtype and size.
void check_conv_grads(const char* op, const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout,
                      const Tensor& dx, const Tensor& dw, ChannelsLast allowed = ChannelsLast::no);

// LSTM gate kernels: `gates` a contiguous float [B, 4H]; the tensors of `gate_like` [B, 4H] and
// of `state_like` [B, H] defined; those and each defined one of `optional_state_like` [B, H] and
// bias [4H] contiguous and of gates' dtype. Returns H.
int64_t check_lstm_gates(const char* op, const Tensor& gates, const Tensor& bias,
                         std::initializer_list<Tensor> gate_like, std::initializer_list<Tensor> state_like,
                         std::initializer_list<Tensor> optional_state_like = {});

}  // namespace octet::kernels
