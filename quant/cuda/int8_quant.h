// CUDA INT8 quantization (definition in quant/int8.h), mirroring quant/cpu/int8_quant.h: absmax,
// round-to-nearest and stochastic quantizers, dequantization, the channel-major quantizer of the
// INT8 conv's output gradient with its cosine statistics, DSGC's evaluations and the bias gradient.
// Codes are those of the element functions of quant/int8.h, bit for bit: the kernels call them
// (no FMA contraction: quant/cuda/*.cu build with --fmad=false), element i of a stochastic
// rounding drawing sr_uniform(seed, i) (one Philox block per four elements, as the CPU). Sums run
// in double in a fixed tree for a given n (deterministic run to run), in another order than the
// CPU's: they agree with it to double rounding, not bit for bit. Raw device pointers, the current
// device and stream; functions returning host values wait for the stream. Pure C++ declarations.
//   std::vector<float> c = absmax({{x, n}, {w, m}});            // one wait for both
//   quantize(x, n, int8_inv_scale(c[0]), Int8Rounding::nearest, 0, codes);
//   DeviceSums s = quantize_channel_major(dy, N, K, P*Q, ld, inv, Int8Rounding::stochastic, seed, dyq);
//   cpu::CosineSums sums = s.read();
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "quant/cpu/int8_quant.h"
#include "quant/int8_tensor.h"

namespace octet::quant::cuda {

// max |x| of each array, NaN when it holds a NaN, inf when an infinity (as cpu::absmax); 0 when
// empty. One copy to the host and one wait for all of them.
std::vector<float> absmax(const std::vector<std::pair<const float*, int64_t>>& arrays);

// codes[i] = int8_round_nearest(x[i], inv), or int8_round_stochastic(x[i], inv, sr_uniform(seed, i)).
void quantize(const float* x, int64_t n, float inv, Int8Rounding rounding, uint64_t seed, int8_t* codes);

// out[i] = codes[i] * scale
void dequantize(const int8_t* codes, int64_t n, float scale, float* out);

// Cosine statistics left on the device by a kernel; read() copies them to the host (waiting for
// the stream), as the cpu::CosineSums of the same quantization up to summation order.
class DeviceSums {
 public:
  explicit DeviceSums(const Tensor& buffer) : buffer_(buffer) {}
  cpu::CosineSums read() const;

 private:
  Tensor buffer_;  // gq, gg, qq (f64) and the max |g| bits
};

// src [outer][inner][len] f32 -> dst [inner][ld] codes: element (o, i, l) to dst[i*ld + o*len + l],
// zeros in [outer*len, ld) of each row (ld >= outer*len). A stochastic rounding draws for
// element (o*inner + i)*len + l, its index in src (as cpu::quantize_transposed). Returns the
// cosine statistics of the quantization.
DeviceSums quantize_channel_major(const float* src, int64_t outer, int64_t inner, int64_t len, int64_t ld, float inv,
                                  Int8Rounding rounding, uint64_t seed, int8_t* dst);

// The statistics of round-to-nearest quantization of g with each of `invs` (DSGC's evaluations),
// in one pass over g per eight of them; one wait per pass.
std::vector<cpu::CosineSums> cosine_sums_nearest(const float* g, int64_t n, const std::vector<float>& invs);

// out[i] = float(sum over o, l of src[(o*inner + i)*len + l]) for src [outer][inner][len],
// accumulated in double (the INT8 conv's bias gradient).
void channel_sums(const float* src, int64_t outer, int64_t inner, int64_t len, float* out);

}  // namespace octet::quant::cuda
