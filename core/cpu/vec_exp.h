// exp for loops the compiler vectorizes: no libm call and no branch, so a loop of it inside
// simd_dispatch (core/cpu/isa.h) compiles to AVX2 / AVX-512 vectors (given -fno-trapping-math, as
// the library is compiled: with traps GCC keeps its clamps as branches on AVX2), and every ISA
// path gives the same bits (the same IEEE operations in the same order; no FMA contraction in
// this library). Within 2 ulp of the correctly rounded exp over the normal range
// (tests/core/test_vec_exp.cpp), 0 below it (subnormal results flush to 0), +inf above it, NaN for
// NaN, exactly 1 at 0.
//   cpu::simd_dispatch([=] { for (int64_t i = 0; i < n; ++i) y[i] = cpu::vec_exp(x[i]); });
#pragma once

#include <bit>
#include <cstdint>

#include "core/cpu/isa.h"

namespace octet::cpu {

OCTET_SIMD_INLINE float vec_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = hi + lo, hi exact in 9 bits
  constexpr float kRound = 12582912.0f;                             // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kLow = -87.33654f, kHigh = 88.72283f;             // exp's normal float range
  const bool nan = x != x;
  const float xc = nan ? 0.0f : (x < kLow ? kLow : (x > kHigh ? kHigh : x));
  const float k = (xc * kLog2e + kRound) - kRound;  // round(x / ln 2), ties to even
  const float r = (xc - k * kLn2Hi) - k * kLn2Lo;   // |r| <= ln 2 / 2 (+ rounding)
  // exp(r) by its Taylor series to r^7 (the first term left out is below 2^-25 relative).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^k in two halves, so that k = -126 .. 128 stays normal in each factor.
  const auto ki = static_cast<int32_t>(k);
  const int32_t k1 = ki / 2, k2 = ki - k1;
  const float s1 = std::bit_cast<float>((k1 + 127) << 23), s2 = std::bit_cast<float>((k2 + 127) << 23);
  const float y = p * s1 * s2;
  return nan ? x : (x < kLow ? 0.0f : (x > kHigh ? __builtin_inff() : y));
}

inline double vec_exp(double x) { return __builtin_exp(x); }  // f64 (gradient checks): libm's

}  // namespace octet::cpu
