// Device kernels behind the ops. Ops (core/ops/) check shapes, allocate outputs and wire
// autograd; these functions only compute, on whatever device the tensors live on. Each is
// implemented for the CPU in core/cpu/ and dispatched by device in core/kernels.cpp.
// Outputs are preallocated; "contiguous" in a comment means the kernel requires it.
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

// dst = src broadcast to dst's shape, converting dtype. Any strides.
void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
// Counter-based random fills; element i uses counter offset + i. dst contiguous, float dtype.
void uniform(const Tensor& dst, double low, double high, uint64_t seed, uint64_t offset);
void normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset);

// out = op(x) elementwise; x broadcasts to out (same dtype).
void unary(UnaryOp op, const Tensor& x, const Tensor& out, double a = 0, double b = 0);
// out = op(a, b) with broadcasting (same dtype).
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// out (u8) = a op b with broadcasting.
void compare(CompareOp op, const Tensor& a, const Tensor& b, const Tensor& out);
// out = cond ? a : b; cond u8, all broadcast to out.
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

// Row reductions: x contiguous [M, R] -> out [M].
void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out);
// Index (i64) of the first max (or min) of each row of contiguous [M, R].
void arg_reduce_rows(bool is_max, const Tensor& x, const Tensor& out);
// Softmax or log-softmax of each row of contiguous [M, R].
void softmax_rows(bool log, const Tensor& x, const Tensor& out);
// The input gradient of each row of contiguous [M, R] from the output y and its gradient g:
// log-softmax dx = g - exp(y) * sum(g), softmax dx = y * (g - sum(g * y)), one pass per row after
// its sum (in double).
void softmax_backward_rows(bool log, const Tensor& y, const Tensor& g, const Tensor& dx);
// The logits' gradient of a cross-entropy from its log-softmax logp [M, R], the targets [M] (i64;
// a row whose target is outside [0, R) gets no one-hot term) and per-row coefficients coef [M]
// (the loss's gradient per row, zero where the target is ignored):
//   dx[i, j] = coef[i] * (exp(logp[i, j]) - smoothing / R - (1 - smoothing) * (j == target[i])).
// One pass over the logits, without the dense gradient of a gather.
void cross_entropy_backward_rows(const Tensor& logp, const Tensor& target, const Tensor& coef, double smoothing,
                                 const Tensor& dx);

// C[M,N] = alpha * op(A) op(B) + beta * C, row-major with leading dimensions (f32, f64).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
          const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc);

// Convolution geometry shared by the conv kernels.
struct Conv2dGeometry {
  int64_t n, c, h, w;  // input
  int64_t k, r, s;     // weight [k, c/groups, r, s]
  int64_t p, q;        // output spatial size
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
};
// x [N,C,H,W], w [K,C/g,R,S], bias [K] or undefined -> out [N,K,P,Q]; all contiguous.
void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out);
// dx [N,C,H,W] (or undefined), dw [K,C/g,R,S] (or undefined) from dout [N,K,P,Q]; contiguous.
void conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                     const Tensor& dw);

// Scaled dot-product attention over contiguous q [B,H,Tq,D], k [B,H,Tk,D], v [B,H,Tk,Dv]
// (core/ops/attention.h). Query i may attend key j unless causal and j > i (top-left aligned, as
// PyTorch's is_causal), or key_padding_mask [B,Tk] (u8, or undefined) is nonzero at (b, j). Dropout
// keeps P[b,h,i,j] where attention_keep(...) says, scaling kept values by 1/(1 - dropout_p).
struct AttentionGeometry {
  int64_t b, h, tq, tk, d, dv;
  double scale;
  bool causal;
  double dropout_p;
  uint64_t seed, offset;  // the dropout draw: element ((b*H + h)*Tq + i)*Tk + j of (seed, offset)
};
// out [B,H,Tq,Dv] and lse [B,H,Tq] (each row's log-sum-exp of its scaled, masked scores; -inf for
// a row with every key masked, whose output is 0, as PyTorch's safe softmax gives). Never holds a
// [Tq, Tk] matrix.
void attention_forward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_padding_mask, const Tensor& out, const Tensor& lse);
// dq, dk, dv (each optional) from dout and the forward's out and lse, the probabilities recomputed.
void attention_backward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv);

struct Pool2dGeometry {
  int64_t n, c, h, w, p, q;
  int64_t kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  bool count_include_pad = true;  // avg pooling
};
// Max pooling; indices (i64) are flat positions h*W+w inside each input plane. Contiguous.
void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out, const Tensor& indices);
void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& indices, const Tensor& dx);
void avg_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out);
void avg_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& dx);
// Adaptive average pooling to [P,Q] (PyTorch's floor/ceil windows). Contiguous.
void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out);
void adaptive_avg_pool2d_backward(const Tensor& dout, const Tensor& dx);

// Batch norm in training mode over x [N, C, S] (S: the spatial size; contiguous): out =
// act(x * scale + shift + residual) (core/norm_act.h; the rounded normalized value plus the
// residual, as `bn(x) + residual` adds them), and the per-channel mean and inverse standard
// deviation (biased variance) the backward needs. weight, bias [C] and residual (x's shape) may be
// undefined.
void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd, NormActivation act = NormActivation::none,
                        const Tensor& residual = Tensor());
// The activation's backward after a fused batch_norm_forward without a residual: out = dout where
// act passes at the recomputed y = x * scale + shift, else 0 (dout, x, out [N, C, S], contiguous;
// out may be dout).
void batch_norm_act_grad(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& out);
// dx (may be undefined), dweight and dbias [C] (may be undefined) from dout [N, C, S].
void batch_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);

// Gathers along the last dim: x [M, C], index i64 [M, J] -> out [M, J]. Contiguous.
// Indices are checked to lie in [0, C).
void gather_rows(const Tensor& x, const Tensor& index, const Tensor& out);
// dx [M, C] += scatter of src [M, J] at index [M, J].
void scatter_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src);
// out [n, D] = x[index[i], :] for x [V, D]; indices checked to lie in [0, V).
void index_select_rows(const Tensor& x, const Tensor& index, const Tensor& out);
// dx [V, D] += src [n, D] at rows index[i] (serial per row, so deterministic).
void index_add_rows(const Tensor& dx, const Tensor& index, const Tensor& src);

// One LSTM step's pointwise part (core/rnn_math.h) for every row of a batch: gates [B, 4H] holds
// the pre-activations (gate order i, f, g, o), bias [4H] (or undefined) is added, and the
// activations are written back in place for the backward; c_prev [B, H] -> c, h [B, H].
// Contiguous, one float dtype.
void lstm_gates_forward(const Tensor& gates, const Tensor& bias, const Tensor& c_prev, const Tensor& c,
                        const Tensor& h);
// Its backward from the activations act [B, 4H], c_prev and c [B, H]: the gradient reaching h is
// dy + dh_next, the one reaching c from the next step dc_next (each may be undefined: zero) ->
// dgates [B, 4H] (of the pre-activations) and dc_prev [B, H], which may be the same tensor as
// dc_next (each element is read before it is written).
void lstm_gates_backward(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dy,
                         const Tensor& dh_next, const Tensor& dc_next, const Tensor& dgates, const Tensor& dc_prev);

}  // namespace kernels
}  // namespace octet
