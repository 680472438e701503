// The CPU versions of quant/'s tensor-level kernels (the list in quant/kernel_signatures.inc;
// quant/kernels.h dispatches to them). They run the loops of quant/cpu/*.h on host tensors.
#pragma once

#include "quant/kernels.h"

namespace octet::quant::cpu {
#include "quant/kernel_signatures.inc"

// int8_conv_forward from x's codes made already (channel-major [C,N,H,W], at clip_x): the INT8
// convolution after batch_norm_act_codes (quant/cpu/int8_conv.h), which has no CUDA counterpart.
Int8ConvKept int8_conv_forward_codes(const Conv2dGeometry& g, const Tensor& xq, float clip_x, const Tensor& w,
                                     const Tensor& bias, float clip_w, const Tensor& out);
}  // namespace octet::quant::cpu
