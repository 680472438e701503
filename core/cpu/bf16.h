// f32 <-> bf16 conversion on the CPU, vectorized per ISA (core/cpu/isa.h simd_dispatch) and split
// over threads. Rounding is to nearest even with NaN kept quiet: the bits of the BFloat16
// constructor (core/dtype.h) on every ISA, as PyTorch's conversion gives. (The AVX512-BF16
// instruction is not used: it flushes subnormal inputs to zero.)
//   cpu::round_to_bf16(x, y, n);   // float[n] -> BFloat16[n]
//   cpu::widen_bf16(y, x, n);      // BFloat16[n] -> float[n], exact
//   Tensor x32 = cpu::widened_to_f32(x);   // a bf16 tensor as f32, in its own layout
#pragma once

#include <cstdint>

#include "core/cpu/isa.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace octet::cpu {

// The BFloat16 constructor's rounding of f32 bits u (a select, so each ISA's copy of a loop
// vectorizes).
OCTET_SIMD_INLINE uint16_t bf16_bits(uint32_t u) { return BFloat16::round_bits(u); }

void round_to_bf16(const float* x, BFloat16* y, int64_t n);
void widen_bf16(const BFloat16* x, float* y, int64_t n);

// For kernels that run a bf16 operand through their f32 path (emulated bf16 products, pools'
// backward): an uninitialized f32 tensor in t's shape and layout (contiguous or channels-last),
// and t widened into one (exact).
Tensor empty_f32_like(const Tensor& t);
Tensor widened_to_f32(const Tensor& t);

}  // namespace octet::cpu
