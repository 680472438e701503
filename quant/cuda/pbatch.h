// The CUDA half of PrecisionBatching (definition in quant/pbatch.h; quant/pbatch.cpp calls these
// for CUDA tensors): the activation quantizer writing the bit-planes, and the product, a kernel
// following the paper (AND + __popcll over the weight planes, the activation planes of a row batched
// together), with an int8 tensor-core or b1 MMA variant only where it measures faster. The same int64
// sums as the CPU's quant/cpu/pbatch.h, so the same outputs bit for bit. Operands contiguous, on the
// current device (the caller holds a DeviceGuard). Pure C++ declarations: no CUDA headers here.
//   PbActivations a = cuda::pb_quantize(x, 16);
//   Tensor y = cuda::pb_linear(w, a, bias);
#pragma once

#include "core/tensor.h"
#include "quant/pbatch.h"

namespace octet::quant::cuda {

// x f32 [batch, cols] -> planes i64 [batch, bits, pb_words(cols)], scale f64 [batch].
PbActivations pb_quantize(const Tensor& x, int bits);
// The paper scheme's static scale: codes int32(trunc(x 2^shift)) (saturated), their low `bits` bits.
PbActivations pb_quantize_fixed(const Tensor& x, int bits, int shift);
// y f32 [batch, rows] = float(double(acc) * (d_r * scale_b)) + bias (undefined: none), d_r = w.row_steps[r]
// or w.step.
Tensor pb_linear(const PbWeights& w, const PbActivations& x, const Tensor& bias);

}  // namespace octet::quant::cuda
