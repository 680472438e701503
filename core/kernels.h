// Device kernels behind the ops: core/'s dispatch point. The kernels themselves are listed once,
// with their documentation, in core/kernel_signatures.inc; this header declares them in
// octet::kernels, whose functions (core/kernels.cpp) check that the tensors share one device and
// run that device's version (core/cpu/, or core/cuda/ in builds with OCTET_CUDA), with the device
// current. Here: the enums and geometries the list uses.
//   kernels::unary(UnaryOp::relu, x, out);   // cpu::unary or cuda::unary by x's device
#pragma once

#include <cstdint>

#include "core/norm_act.h"
#include "core/tensor.h"

namespace octet {

enum class UnaryOp : uint8_t {
  neg,
  exp,
  log,
  sqrt,
  rsqrt,
  abs,
  sign,
  relu,
  relu6,
  sigmoid,
  tanh,
  gelu,
  gelu_tanh,
  gelu_grad,
  gelu_tanh_grad,
  reciprocal,
  square,
  clamp,       // a = min, b = max
  pow_scalar,  // x^a
  mul_scalar,  // x*a
  add_scalar,  // x+a
};
// relu_grad(g, y) = y > 0 ? g : 0 and relu6_grad(g, x) = 0 < x < 6 ? g : 0: the backward of relu
// (from its output) and relu6 (from its input) as one select, as PyTorch's threshold_backward.
enum class BinaryOp : uint8_t { add, sub, mul, div, pow, maximum, minimum, relu_grad, relu6_grad };
enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge };
enum class ReduceOp : uint8_t { sum, max, min, sum_sq, logsumexp };

namespace kernels {

// Convolution geometry shared by the conv kernels.
struct Conv2dGeometry {
  int64_t n, c, h, w;  // input
  int64_t k, r, s;     // weight [k, c/groups, r, s]
  int64_t p, q;        // output spatial size
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
};

// Pooling geometry shared by the pool kernels.
// Scaled dot-product attention over contiguous q [B,H,Tq,D], k [B,H,Tk,D], v [B,H,Tk,Dv]
// (core/ops/attention.h). Query i may attend key j unless causal and j > i (top-left aligned, as
// PyTorch's is_causal), or key_padding_mask [B,Tk] (u8, or undefined) is nonzero at (b, j). Dropout
// keeps P[b,h,i,j] where attention_dropout_keep says, scaling kept values by 1/(1 - dropout_p).
struct AttentionGeometry {
  int64_t b, h, tq, tk, d, dv;
  double scale;
  bool causal;
  double dropout_p;
  uint64_t seed, offset;  // the dropout draw: element ((b*H + h)*Tq + i)*Tk + j of (seed, offset)
  // bf16 attention (core/autocast.h) on f32 operands holding bf16 values: the probabilities P~
  // and dS rounded to bf16 before the products that take them, as the CPU's bf16 kernel rounds
  // (bf16 q, k, v imply it there).
  bool round_bf16 = false;
};

struct Pool2dGeometry {
  int64_t n, c, h, w, p, q;
  int64_t kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  bool count_include_pad = true;  // avg pooling
};

#include "core/kernel_signatures.inc"  // IWYU pragma: export

}  // namespace kernels
}  // namespace octet
