// f32 <-> bf16 conversion on the CPU, vectorized per ISA (core/cpu/isa.h simd_dispatch) and split
// over threads. Rounding is to nearest even with NaN kept quiet: the bits of the BFloat16
// constructor (core/dtype.h) on every ISA, as PyTorch's conversion gives. (The AVX512-BF16
// instruction is not used: it flushes subnormal inputs to zero.)
//   cpu::round_to_bf16(x, y, n);   // float[n] -> BFloat16[n]
//   cpu::widen_bf16(y, x, n);      // BFloat16[n] -> float[n], exact
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace octet::cpu {

void round_to_bf16(const float* x, BFloat16* y, int64_t n);
void widen_bf16(const BFloat16* x, float* y, int64_t n);

}  // namespace octet::cpu
