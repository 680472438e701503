// Tensor-level INT8 quantization (the element definition is in quant/int8.h): the clip of a tensor,
// f32 -> i8 codes with round-to-nearest or stochastic rounding, and back. The INT8 convolution
// (quant/int8_conv.h) and the clip search (quant/dsgc.h) are built from the same CPU loops
// (quant/cpu/int8_quant.h).
//   float c = int8_absmax(x);
//   Tensor q = int8_quantize(dy, c, Int8Rounding::stochastic, int8_backward_seed(layer.seed, step));
//   Tensor back = int8_dequantize(q, c);                            // == q * (c / 127), f32
//
// Non-finite values: int8_absmax is NaN when x holds a NaN and +inf when it holds an infinity
// (and no NaN); it never skips them. Quantizing with such a clip gives codes 0 (inv = 0) and a
// scale of NaN or inf, so everything computed from it (a dequantized tensor, an INT8 conv output,
// its gradients) is NaN: a diverged input stays visible downstream instead of silently turning
// into zeros. (An element quantizer given a finite clip still maps a NaN element to 0, as
// quant/int8.h defines; the conv op checks its gradient for non-finite values itself.)
// Devices: CPU, and CUDA in builds with the CUDA backend (quant/cuda/int8_quant.h), with the same
// codes bit for bit; a tensor on another device is an octet::Error naming the function.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quant/int8.h"

namespace octet::quant {

enum class Int8Rounding : uint8_t { nearest, stochastic };

// max |x| over all elements of an f32 tensor (any strides); 0 for an empty tensor; NaN / inf as
// described above. Exact, so it does not depend on the thread count.
float int8_absmax(const Tensor& x);

// x f32 (any shape and strides) -> i8 codes of the same shape (contiguous). Element i (row-major
// order of x) of a stochastic rounding draws sr_uniform(seed, i). clip must be >= 0 or NaN/inf
// (then every code is 0, see above); a negative clip is an octet::Error.
Tensor int8_quantize(const Tensor& x, float clip, Int8Rounding rounding = Int8Rounding::nearest, uint64_t seed = 0);

// i8 codes -> f32 values q * int8_scale(clip), same shape (contiguous).
Tensor int8_dequantize(const Tensor& q, float clip);

// The stochastic-rounding seed of backward pass `step` of a layer seeded `layer_seed`: one
// Philox4x32 block keyed by layer_seed at counter (step, "int8"), words 0 and 1. Distinct steps
// and layers draw unrelated streams; the CUDA path calls the same function on the host.
uint64_t int8_backward_seed(uint64_t layer_seed, int64_t step);

// An octet::Error naming `op` unless INT8 kernels run on device d: the CPU, and CUDA devices in
// builds with the CUDA backend.
void check_int8_device(Device d, const char* op);
// x detached and contiguous, after checking that it is a defined f32 tensor on such a device (the
// operand every INT8 quantization entry point reads); errors name `op`.
Tensor int8_f32_operand(const Tensor& x, const char* op);

}  // namespace octet::quant
