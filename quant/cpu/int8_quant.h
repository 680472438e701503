// CPU loops of INT8 quantization (definition in quant/int8.h): absmax, round-to-nearest and
// stochastic-rounding quantizers, dequantization, the plane-transposing quantizer the INT8 conv
// uses to write its operands channel-major, and the cosine statistics of DSGC.
//   float c = cpu::absmax(x, n);
//   cpu::quantize(x, n, int8_inv_scale(c), Int8Rounding::stochastic, seed, /*first=*/0, codes);
//   cpu::CosineSums s = cpu::cosine_sums_nearest(g, n, inv);  double d = cpu::cosine_distance(s);
//
// Every loop gives the codes of the element functions of quant/int8.h bit for bit (tests compare
// them on every rounding boundary); they are written so the compiler vectorizes them: the
// round-to-nearest of a clamped |y| <= 127 is (y + 1.5*2^23) - 1.5*2^23 (ties to even, as
// nearbyint in the default rounding mode), floor is a truncation corrected by one. Work is cut
// into fixed blocks, and sums are combined in block order, so no result depends on the threads.
// Each loop is compiled for AVX-512, AVX2 and baseline x86-64 and picked by the active ISA
// (octet::cpu::simd_dispatch, core/cpu/isa.h; cpu::set_active_isa chooses, so tests run every
// copy); the library is built with -ffp-contract=off so no copy fuses a multiply-add.
#pragma once

#include <cstdint>

#include "quant/cosine_sums.h"
#include "quant/int8_tensor.h"

namespace octet::quant::cpu {

// Elements per parallel block of the flat loops.
inline constexpr int64_t kQuantBlock = 1 << 15;

// max |x[i]|; NaN when some x[i] is NaN (inf when some is infinite); 0 for n == 0.
float absmax(const float* x, int64_t n);

// codes[i] = int8_round_nearest(x[i], inv), or int8_round_stochastic(x[i], inv,
// sr_uniform(seed, first + i)): `first` is the index of x[0] in the tensor being quantized.
void quantize(const float* x, int64_t n, float inv, Int8Rounding rounding, uint64_t seed, uint64_t first,
              int8_t* codes);

// out[i] = codes[i] * scale
void dequantize(const int8_t* codes, int64_t n, float scale, float* out);

// The statistics of a quantization that give its cosine distance (quant/cosine_sums.h).
using quant::cosine_distance;
using quant::CosineSums;

// The sums of round-to-nearest quantization of g with `inv`, without writing codes: one DSGC
// evaluation.
CosineSums cosine_sums_nearest(const float* g, int64_t n, float inv);

// src holds planes [outer][inner][len] (floats), dst receives them as [inner][outer][len] (codes):
// the INT8 conv stores x [N,C,H,W] as codes [C,N,H,W] and dy [N,K,P,Q] as [K,N,P,Q], so a range
// of output positions of one channel is one contiguous run for the GEMMs. Element (o, i, l) is
// element (o*inner + i)*len + l of src for stochastic rounding (the index in the tensor's own
// row-major order, so the codes do not depend on the layout). With `sums`, also the cosine
// statistics of the whole quantization; with `inner_sums` ([inner] doubles), the sum of each inner
// index's float values over outer and len (the conv's bias gradient, from the same pass over dy),
// in a fixed order.
void quantize_transposed(const float* src, int64_t outer, int64_t inner, int64_t len, float inv, Int8Rounding rounding,
                         uint64_t seed, int8_t* dst, CosineSums* sums = nullptr, double* inner_sums = nullptr);

}  // namespace octet::quant::cpu
