// The batch statistics of one channel and its normalized, activated output as the CPU batch norm
// computes them (core/cpu/norm.cpp), shared with the INT8 convolution's fused batch norm + quantize
// (quant/cpu/int8_bn_quant.cpp), so both give the same numbers. Two passes (no E[x^2] - E[x]^2 cancellation for large
// means), sums in double over 8 lanes (core/cpu/lanes.h), so every per-ISA copy adds the same
// numbers in the same order. Call from code compiled per ISA (simd_dispatch), where it inlines.
//   T mean, invstd;  bn_channel_stats(x + ch * s, n, c * s, s, eps, mean, invstd);
//   affine_act_channel(act, x + ch * s, nullptr, out + ch * s, n, c * s, c * s, s, scale, shift);
#pragma once

#include <cmath>
#include <cstdint>

#include "core/cpu/lanes.h"
#include "core/norm_act.h"

namespace octet::cpu {

// xc: the channel's n rows of s values (D: T or bf16), rows `stride` apart. mean and invstd =
// 1/sqrt(var + eps) (biased variance), rounded to T.
template <typename D, typename T>
OCTET_SIMD_INLINE void bn_channel_stats(const D* xc, int64_t n, int64_t stride, int64_t s, double eps, T& mean,
                                        T& invstd) {
  const double count = static_cast<double>(n * s);
  const int64_t s8 = s / 8 * 8;
  Lanes8 sum;
  double sum_tail = 0;
  for (int64_t i = 0; i < n; ++i) {
    const D* row = xc + i * stride;
    for (int64_t j = 0; j < s8; j += 8) sum += Lanes8::load(row + j);
    for (int64_t j = s8; j < s; ++j) sum_tail += static_cast<T>(row[j]);
  }
  const double mu = (sum.pairwise_total() + sum_tail) / count;
  Lanes8 sq;
  double sq_tail = 0;
  for (int64_t i = 0; i < n; ++i) {
    const D* row = xc + i * stride;
    for (int64_t j = 0; j < s8; j += 8) {
      const Lanes8 d = Lanes8::load(row + j) - mu;
      sq += d * d;
    }
    for (int64_t j = s8; j < s; ++j) {
      const double d = static_cast<T>(row[j]) - mu;
      sq_tail += d * d;
    }
  }
  mean = static_cast<T>(mu);
  invstd = static_cast<T>(1.0 / std::sqrt((sq.pairwise_total() + sq_tail) / count + eps));
}

// The normalized value x * scale + shift as the unfused batch norm writes it: rounded to D (bf16
// activations), in T.
template <typename D, typename T>
OCTET_SIMD_INLINE T pre_activation(D x, T scale, T shift) {
  return static_cast<T>(static_cast<D>(static_cast<T>(x) * scale + shift));
}

// out rows = act(x * scale + shift [+ r]) over one channel's n rows of s values (x and r rows
// `stride` apart, out rows `out_stride` apart; D: T, or bf16 loaded into T and rounded once on the
// store); with R, r is the residual's rows at x's offsets, added to the normalized value rounded
// to D, as the unfused `bn(x) + r` adds it.
template <NormActivation A, bool R, typename D, typename T>
OCTET_SIMD_INLINE void affine_rows(const D* xc, const D* rc, D* oc, int64_t n, int64_t stride, int64_t out_stride,
                                   int64_t s, T scale, T shift) {
  for (int64_t i = 0; i < n; ++i) {
    const D* row = xc + i * stride;
    D* orow = oc + i * out_stride;
    if constexpr (R) {
      const D* rrow = rc + i * stride;
      for (int64_t j = 0; j < s; ++j) {
        orow[j] = static_cast<D>(norm_act_apply(A, pre_activation(row[j], scale, shift) + static_cast<T>(rrow[j])));
      }
    } else {
      for (int64_t j = 0; j < s; ++j) orow[j] = static_cast<D>(norm_act_apply(A, static_cast<T>(row[j]) * scale + shift));
    }
  }
}

// f.template operator()<A>() for the activation `act`: the activation is picked once, outside the
// loops that apply it.
template <typename F>
OCTET_SIMD_INLINE void with_norm_act(NormActivation act, F&& f) {
  switch (act) {
    case NormActivation::none:
      return f.template operator()<NormActivation::none>();
    case NormActivation::relu:
      return f.template operator()<NormActivation::relu>();
    case NormActivation::relu6:
      return f.template operator()<NormActivation::relu6>();
  }
}

// affine_rows with the activation picked once per channel and without or with a residual (rc null:
// none), so the row loops have no branch.
template <typename D, typename T>
OCTET_SIMD_INLINE void affine_act_channel(NormActivation act, const D* xc, const D* rc, D* oc, int64_t n,
                                          int64_t stride, int64_t out_stride, int64_t s, T scale, T shift) {
  with_norm_act(act, [&]<NormActivation A>() {
    if (rc != nullptr)
      affine_rows<A, true>(xc, rc, oc, n, stride, out_stride, s, scale, shift);
    else
      affine_rows<A, false>(xc, rc, oc, n, stride, out_stride, s, scale, shift);
  });
}

}  // namespace octet::cpu
