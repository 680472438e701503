// The PrecisionBatching reference code's weight quantization (PbScheme::paper, quant/pbatch.h), as
// its pbatch_linear.py computes it (pbatch_round_quantize, optimize_cutoff_W; read for the facts):
//   fixed point: f = trunc(|w'| * 2^16) (an integer), w' = sign(w) * min(|w|, t) for a clip t;
//   max_place = ceil(log2(max f)) + 1, at least n (16 when max f is 0); e = max_place - n;
//   the levels are k * 2^e, k = 1 .. 2^n - 1 (the reference's bins less the 0 it never picks), the
//   nearest one taken with ties upwards, so q = sign(w') * clamp(floor(f / 2^e + 1/2), 1, 2^n - 1)
//   (a non-zero weight is never 0, a zero weight is 0); w ~ q * 2^(e - 16).
//   The grid uses half its codes: max f <= 2^(max_place - 1), so |q| <= 2^(n-1) (the +1 above).
// Clip search: t over the candidates of numpy's arange(min|W|, max|W|, max((max|W| - min|W|) / 100,
// 0.001)): t_0 = min|W|, delta = (t_0 + step) - t_0, t_i = t_0 + i * delta for i < ceil((max - min) /
// step), in double (t_1 = t_0 + step, numpy's second value); the first t with the least mean |w - q 2^(e - 16)| over
// the original w. The candidates stop short of max|W|, so the search always clips (as the reference); with no candidate
// (max|W| == min|W|, where the reference fails) no clip. Without the search, no clip.
// The groups: the whole tensor, or (the per-row step) each row by itself.
//   PbPaperGrid g = pb_paper_grid(w, n, /*bits=*/4, /*clip_search=*/true);
//   int32_t q = pb_paper_code(w[0], g, 4);   double d = g.step();
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace octet::quant {

inline constexpr int kPbPaperFixedBits = 16;  // the reference's scale 2^16
// The fixed point must stay far inside int64 (and log2 exact): |w| below 2^20.
inline constexpr double kPbPaperMaxAbs = 1048576.0;

struct PbPaperGrid {
  double clip = std::numeric_limits<double>::infinity();  // t (infinity: none)
  int exponent = 0;                                       // e
  double step() const { return std::ldexp(1.0, exponent - kPbPaperFixedBits); }
};

// f = trunc(min(|w|, t) * 2^16).
inline int64_t pb_paper_fixed(float w, double clip) {
  const double a = std::fabs(static_cast<double>(w));
  return static_cast<int64_t>(std::trunc((a < clip ? a : clip) * 65536.0));
}
// e for the largest fixed-point magnitude m and n bits.
int pb_paper_exponent(int64_t max_fixed, int bits);
// q for w on grid g (n bits).
inline int32_t pb_paper_code(float w, const PbPaperGrid& g, int bits) {
  if (w == 0.0f || g.clip <= 0.0) return 0;  // sign(w') = 0
  const int64_t f = pb_paper_fixed(w, g.clip);
  const int64_t half = g.exponent > 0 ? int64_t{1} << (g.exponent - 1) : 0;
  int64_t m = (f + half) >> g.exponent;
  const int64_t top = (int64_t{1} << bits) - 1;
  m = m < 1 ? 1 : (m > top ? top : m);
  return static_cast<int32_t>(w < 0.0f ? -m : m);
}
// The grid of n weights w (finite, |w| < kPbPaperMaxAbs: the caller checks) at n bits.
PbPaperGrid pb_paper_grid(const float* w, int64_t n, int bits, bool clip_search);

}  // namespace octet::quant
