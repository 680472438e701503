// Batch norm fused with the activation that follows it (conv -> BN -> ReLU/ReLU6, as in ResNet
// and MobileNetV2). The forward writes act(x * scale + shift) in one pass; the backward needs no
// saved activation: it recomputes y = x * scale + shift from the batch norm's own saved input and
// statistics, with these functions, so the mask is the unfused relu/relu6 backward's to the bit.
// Unfused, the activation kept a float copy of its input or output; fused, an INT8 convolution
// after it keeps only its int8 codes and the float activation is freed after the forward.
// A residual block's act(bn(x) + r) adds r to the rounded normalized value in the same pass; its
// backward masks with the output, as relu's (batch_norm in core/ops/norm.h).
//   T scale, shift;  bn_affine(mean[c], invstd[c], w, b, c, scale, shift);
//   out = norm_act_apply(NormActivation::relu6, x * scale + shift);
#pragma once

#include <cstdint>

#include "core/hostdevice.h"

namespace octet {

enum class NormActivation : uint8_t { none, relu, relu6 };

// The per-channel affine of the normalization, from the stored (rounded) mean and invstd, so the
// backward's recomputation starts from the same numbers as the forward. weight/bias may be null.
template <typename T>
OCTET_HD inline void bn_affine(T mean, T invstd, const T* weight, const T* bias, int64_t ch, T& scale, T& shift) {
  scale = static_cast<T>(static_cast<double>(invstd) * (weight != nullptr ? static_cast<double>(weight[ch]) : 1.0));
  shift = static_cast<T>((bias != nullptr ? static_cast<double>(bias[ch]) : 0.0) -
                         static_cast<double>(mean) * static_cast<double>(scale));
}

// The activation, as UnaryOp::relu / relu6 compute it.
template <typename T>
OCTET_HD inline T norm_act_apply(NormActivation act, T y) {
  if (act == NormActivation::none) return y;
  if (act == NormActivation::relu) return y > T(0) ? y : T(0);
  return y > T(0) ? (y < T(6) ? y : T(6)) : T(0);
}

// Whether the gradient passes at pre-activation y, as BinaryOp::relu_grad (y > 0; relu's output
// is positive exactly where its input is) and relu6_grad (0 < y < 6) decide.
template <typename T>
OCTET_HD inline bool norm_act_passes(NormActivation act, T y) {
  if (act == NormActivation::none) return true;
  if (act == NormActivation::relu) return y > T(0);
  return y > T(0) && y < T(6);
}

}  // namespace octet
