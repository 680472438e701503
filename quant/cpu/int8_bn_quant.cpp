// The fused producer of an INT8 convolution's input (batch_norm_act_codes, quant/kernel_signatures.inc):
// batch norm in training mode with its activation, writing the convolution's int8 codes instead of
// the float activation. The clip the codes need, max|y| over the whole tensor, is known before
// the output pass: y = act(z * scale + shift) is monotone in z within a channel (each rounding is
// monotone, and so is the activation), so a channel's largest |y| is |y| at the channel's smallest
// or largest z, computed with the same float expression. Where scale or shift is NaN (a NaN or
// infinite z makes the channel's statistics NaN), every y of the channel is that same value, so
// the endpoints give it too. So the clip, and with it every code, is the unfused path's bit for
// bit (batch_norm_forward, then int8_absmax and the nearest quantizer).
// Built with -ffp-contract=off (CMakeLists.txt), like every file compiled per ISA.
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/norm_stats.h"
#include "core/norm_act.h"
#include "core/parallel.h"
#include "quant/cpu/int8_conv.h"
#include "quant/cpu/int8_quant.h"
#include "quant/cpu/kernels.h"

namespace octet::quant::cpu {

namespace {

// Smallest and largest value of the channel's rows (NaNs may be skipped: they make the channel's
// statistics NaN, and then its extremes do not matter).
OCTET_SIMD_INLINE void channel_range(const float* zc, int64_t n, int64_t stride, int64_t s, float& lo, float& hi) {
  float l = std::numeric_limits<float>::infinity(), h = -l;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = zc + i * stride;
    for (int64_t j = 0; j < s; ++j) {
      l = row[j] < l ? row[j] : l;
      h = row[j] > h ? row[j] : h;
    }
  }
  lo = l, hi = h;
}

// max(|a|, |b|), NaN if either is NaN.
float abs_max_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return std::max(std::fabs(a), std::fabs(b));
}

}  // namespace

float batch_norm_act_codes(const Tensor& z, const Tensor& weight, const Tensor& bias, double eps, NormActivation act,
                           const Tensor& mean, const Tensor& invstd, const Tensor& codes) {
  const char* op = "batch_norm_act_codes";
  OCTET_CHECK(z.defined() && z.device().is_cpu() && z.dtype() == DType::f32 && z.dim() == 3 && z.is_contiguous(), op,
              ": expected a contiguous f32 CPU input [N, C, S]");
  const int64_t n = z.size(0), c = z.size(1), s = z.size(2);
  for (const Tensor* t : {&weight, &bias, &mean, &invstd})
    OCTET_CHECK(!t->defined() ||
                    (t->device().is_cpu() && t->dtype() == DType::f32 && t->is_contiguous() && t->shape() == Shape{c}),
                op, ": per-channel tensors must be contiguous f32 [", c, "]");
  OCTET_CHECK(mean.defined() && invstd.defined(), op, ": mean and invstd are outputs and must be given");
  OCTET_CHECK(codes.defined() && codes.device().is_cpu() && codes.dtype() == DType::i8 && codes.is_contiguous() &&
                  codes.numel() == z.numel(),
              op, ": expected contiguous i8 codes of ", z.numel(), " elements");
  const float* pz = z.data<float>();
  const float* pw = weight.defined() ? weight.data<float>() : nullptr;
  const float* pb = bias.defined() ? bias.data<float>() : nullptr;
  float* pm = mean.data<float>();
  float* pi = invstd.data<float>();
  std::vector<float> extreme(static_cast<size_t>(c));  // per channel: max |y|, NaN if a y is NaN
  parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
    octet::cpu::simd_dispatch([=, e = extreme.data()] {
      for (int64_t ch = begin; ch < end; ++ch) {
        const float* zc = pz + ch * s;
        octet::cpu::bn_channel_stats(zc, n, c * s, s, eps, pm[ch], pi[ch]);
        float scale, shift, lo, hi;
        bn_affine(pm[ch], pi[ch], pw, pb, ch, scale, shift);
        channel_range(zc, n, c * s, s, lo, hi);
        e[ch] = abs_max_nan(norm_act_apply(act, lo * scale + shift), norm_act_apply(act, hi * scale + shift));
      }
    });
  });
  float clip = 0.0f;  // as int8_absmax: NaN if some value is NaN, else the largest
  for (float e : extreme)
    clip = std::isnan(clip) || std::isnan(e) ? std::numeric_limits<float>::quiet_NaN() : std::max(clip, e);
  const float inv = int8_inv_scale(clip);
  int8_t* pq = codes.data<int8_t>();
  parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> y(static_cast<size_t>(n * s));
    for (int64_t ch = begin; ch < end; ++ch) {
      float scale, shift;
      bn_affine(pm[ch], pi[ch], pw, pb, ch, scale, shift);
      octet::cpu::simd_dispatch([=, zc = pz + ch * s, out = y.data()] {
        octet::cpu::affine_act_channel(act, zc, static_cast<const float*>(nullptr), out, n, c * s, s, s, scale, shift);
      });
      quantize(y.data(), n * s, inv, Int8Rounding::nearest, 0, 0, pq + ch * n * s);
    }
  });
  return clip;
}

}  // namespace octet::quant::cpu
