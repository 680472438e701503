#include "core/ops/rnn.h"

#include <vector>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/concat.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/reduce.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

LstmState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih, const Tensor& w_hh,
                    const Tensor& b_ih, const Tensor& b_hh) {
  OCTET_CHECK(x.defined() && h.defined() && c.defined() && x.dim() == 2 && h.dim() == 2 && c.dim() == 2,
              "lstm_cell: expected 2-D x [B, I], h [B, H], c [B, H]");
  int64_t hs = h.size(1);
  OCTET_CHECK(c.shape() == h.shape() && x.size(0) == h.size(0), "lstm_cell: shapes differ: x ", x.shape(), ", h ",
              h.shape(), ", c ", c.shape());
  OCTET_CHECK(w_ih.defined() && w_ih.shape() == (Shape{4 * hs, x.size(1)}), "lstm_cell: w_ih must be [", 4 * hs, ", ",
              x.size(1), "], got ", w_ih.defined() ? w_ih.shape() : Shape{});
  OCTET_CHECK(w_hh.defined() && w_hh.shape() == (Shape{4 * hs, hs}), "lstm_cell: w_hh must be [", 4 * hs, ", ", hs,
              "], got ", w_hh.defined() ? w_hh.shape() : Shape{});
  Tensor gates = linear(x, w_ih, b_ih) + linear(h, w_hh, b_hh);
  Tensor i = sigmoid(gates.narrow(1, 0, hs));
  Tensor f = sigmoid(gates.narrow(1, hs, hs));
  Tensor g = tanh(gates.narrow(1, 2 * hs, hs));
  Tensor o = sigmoid(gates.narrow(1, 3 * hs, hs));
  Tensor c1 = f * c + i * g;
  return {o * tanh(c1), c1};
}

namespace {

struct LstmDims {
  int64_t t, b, i, h;
};

// c [m, n] = op(a) op(b) + beta c for contiguous row-major operands (a [m, k] or, transposed,
// [k, m]; b [k, n] or [n, k]); views with an offset are fine. With `bf16` (autocast), an f32
// operand is rounded to bf16 first (a bf16 one is used as it is) and c accumulates in f32.
void gemm_rows(bool bf16, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Tensor& a, const Tensor& b,
               double beta, const Tensor& c) {
  const Tensor& a2 = bf16 ? autocast::cast(a, DType::bf16) : a;
  const Tensor& b2 = bf16 ? autocast::cast(b, DType::bf16) : b;
  kernels::gemm(trans_a, trans_b, m, n, k, 1.0, a2, trans_a ? m : k, b2, trans_b ? k : n, beta, c, n);
}

// Shapes, dtypes and devices of lstm_layer's arguments.
LstmDims check_lstm_layer(const char* op, const Tensor& x, const LstmState& s, const Tensor& w_ih, const Tensor& w_hh,
                          const Tensor& b_ih, const Tensor& b_hh) {
  OCTET_CHECK(x.defined() && x.dim() == 3, op, ": expected input x [T, B, I], got ", x.defined() ? x.shape() : Shape{});
  OCTET_CHECK(x.size(0) >= 1, op, ": expected at least one time step, got input shape ", x.shape());
  OCTET_CHECK(w_hh.defined() && w_hh.dim() == 2 && w_hh.size(0) == 4 * w_hh.size(1), op, ": w_hh must be [4H, H], got ",
              w_hh.defined() ? w_hh.shape() : Shape{});
  const LstmDims d{x.size(0), x.size(1), x.size(2), w_hh.size(1)};
  OCTET_CHECK(w_ih.defined() && w_ih.shape() == (Shape{4 * d.h, d.i}), op, ": w_ih must be [", 4 * d.h, ", ", d.i,
              "], got ", w_ih.defined() ? w_ih.shape() : Shape{});
  OCTET_CHECK(b_ih.defined() == b_hh.defined(), op, ": pass both biases or neither");
  for (const Tensor* bias : {&b_ih, &b_hh})
    OCTET_CHECK(!bias->defined() || bias->shape() == Shape{4 * d.h}, op, ": biases must be [", 4 * d.h, "], got ",
                bias->shape());
  OCTET_CHECK(s.h.defined() == s.c.defined(), op, ": the state needs both h and c, or neither");
  for (const Tensor* st : {&s.h, &s.c})
    OCTET_CHECK(!st->defined() || st->shape() == (Shape{d.b, d.h}), op, ": state tensors must be [", d.b, ", ", d.h,
                "], got ", st->shape());
  for (const Tensor* t : {&w_ih, &w_hh, &b_ih, &b_hh, &s.h, &s.c}) {
    if (!t->defined()) continue;
    OCTET_CHECK(t->dtype() == x.dtype() && t->device() == x.device(), op, ": every tensor must be ", x.dtype(), " on ",
                x.device(), ", got one ", t->dtype(), " on ", t->device());
  }
  OCTET_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::f64, op, ": expected dtype f32 or f64, got ", x.dtype());
  return d;
}

}  // namespace

std::pair<Tensor, LstmState> lstm_layer_reference(const Tensor& x, const LstmState& state, const Tensor& w_ih,
                                                  const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  const LstmDims d = check_lstm_layer("lstm_layer_reference", x, state, w_ih, w_hh, b_ih, b_hh);
  TensorOptions like = TensorOptions(x.dtype()).device(x.device());
  LstmState s = state.h.defined() ? state : LstmState{zeros({d.b, d.h}, like), zeros({d.b, d.h}, like)};
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < d.t; ++t) {
    s = lstm_cell(x.select(0, t), s.h, s.c, w_ih, w_hh, b_ih, b_hh);
    ys.push_back(s.h);
  }
  return {stack(ys, 0), s};
}

std::pair<Tensor, LstmState> lstm_layer(const Tensor& x, const LstmState& state, const Tensor& w_ih, const Tensor& w_hh,
                                        const Tensor& b_ih, const Tensor& b_hh) {
  // bf16 activations (autocast's): widened exactly; the gate products still run in bf16.
  if (x.defined() && x.dtype() == DType::bf16) return lstm_layer(x.to(DType::f32), state, w_ih, w_hh, b_ih, b_hh);
  const LstmDims d = check_lstm_layer("lstm_layer", x, state, w_ih, w_hh, b_ih, b_hh);
  const TensorOptions like = TensorOptions(x.dtype()).device(x.device());
  const int64_t g4 = 4 * d.h, rows = d.t * d.b;
  const bool has_state = state.h.defined();
  // autocast (core/autocast.h): the gate products in bf16 (the weights cast once per scope; x and
  // the weights kept for the backward as bf16), the gates, cell, states and gradients in f32, the
  // output sequence rounded to autocast::output_dtype (bf16 on the CPU).
  const bool bf16 = autocast::lowers("lstm_layer", x);
  Tensor xc, wih, whh, h0, c0, gates, cs, y, h_last, c_last;
  {
    NoGradGuard ng;
    xc = bf16 ? autocast::cast(x.contiguous(), DType::bf16) : x.detach().contiguous();
    wih = bf16 ? autocast::cast(w_ih, DType::bf16).contiguous() : w_ih.detach().contiguous();
    whh = bf16 ? autocast::cast(w_hh, DType::bf16).contiguous() : w_hh.detach().contiguous();
    Tensor bias = b_ih.defined() ? (b_ih.detach() + b_hh.detach()).contiguous() : Tensor();
    h0 = has_state ? state.h.detach().contiguous() : Tensor();
    c0 = has_state ? state.c.detach().contiguous() : zeros({d.b, d.h}, like);
    // gates[t] = x[t] W_ih^T for every step at once; each step adds h[t-1] W_hh^T in place, then
    // the fused kernel turns the row into the activations i, f, g, o (kept for the backward).
    gates = empty({d.t, d.b, g4}, like);
    gemm_rows(bf16, false, true, rows, g4, d.i, xc, wih, 0.0, gates);
    cs = empty({d.t, d.b, d.h}, like);
    y = empty({d.t, d.b, d.h}, like);
    for (int64_t t = 0; t < d.t; ++t) {
      Tensor g = gates.select(0, t);
      if (t > 0 || has_state) gemm_rows(bf16, false, true, d.b, g4, d.h, t > 0 ? y.select(0, t - 1) : h0, whh, 1.0, g);
      kernels::lstm_gates_forward(g, bias, t > 0 ? cs.select(0, t - 1) : c0, cs.select(0, t), y.select(0, t));
    }
    h_last = y.select(0, d.t - 1).clone();
    c_last = cs.select(0, d.t - 1).clone();
  }
  if (autograd::needs_grad({x, state.h, state.c, w_ih, w_hh, b_ih, b_hh})) {
    const bool rx = x.requires_grad(), rh = has_state && state.h.requires_grad(),
               rc = has_state && state.c.requires_grad(), rwi = w_ih.requires_grad(), rwh = w_hh.requires_grad(),
               rbi = b_ih.defined() && b_ih.requires_grad(), rbh = b_hh.defined() && b_hh.requires_grad();
    autograd::record("lstm_layer", {x, state.h, state.c, w_ih, w_hh, b_ih, b_hh}, {y, h_last, c_last},
                     [=, sx = saved(xc), sh0 = saved(h0), sc0 = saved(c0), swi = saved(wih), swh = saved(whh),
                      sg = saved(gates), scs = saved(cs), sy = saved(y)](const Grads& grads) {
                       const Tensor &act = sg.get(), &cells = scs.get(), &hs = sy.get(), &w_hh_v = swh.get();
                       const TensorOptions o = TensorOptions(act.dtype()).device(act.device());
                       Tensor dy = grads[0].contiguous();
                       Tensor dh = grads[1].contiguous().clone(),
                              dc = grads[2].contiguous().clone();  // written in place
                       Tensor dgates = empty(act.shape(), o);
                       // Backward through time: dh carries dgates[t] W_hh to step t-1, dc the cell gradient.
                       for (int64_t t = d.t - 1; t >= 0; --t) {
                         Tensor dg = dgates.select(0, t);
                         kernels::lstm_gates_backward(act.select(0, t), t > 0 ? cells.select(0, t - 1) : sc0.get(),
                                                      cells.select(0, t), dy.select(0, t), dh, dc, dg, dc);
                         if (t > 0 || rh) gemm_rows(bf16, false, false, d.b, d.h, g4, dg, w_hh_v, 0.0, dh);
                       }
                       Tensor dx, dwi, dwh, db;
                       if (rx) {
                         dx = empty({d.t, d.b, d.i}, o);
                         gemm_rows(bf16, false, false, rows, d.i, g4, dgates, swi.get(), 0.0, dx);
                       }
                       if (rwi) {
                         dwi = empty({g4, d.i}, o);
                         gemm_rows(bf16, true, false, g4, d.i, rows, dgates, sx.get(), 0.0, dwi);
                       }
                       if (rwh) {
                         // dW_hh = sum_t dgates[t]^T h[t-1], with h[-1] = h0 (zero without a state).
                         dwh = zeros({g4, d.h}, o);
                         if (has_state)
                           gemm_rows(bf16, true, false, g4, d.h, d.b, dgates.select(0, 0), sh0.get(), 0.0, dwh);
                         if (d.t > 1)
                           gemm_rows(bf16, true, false, g4, d.h, (d.t - 1) * d.b, dgates.narrow(0, 1, d.t - 1),
                                     hs.narrow(0, 0, d.t - 1), 1.0, dwh);
                       }
                       if (rbi || rbh) db = sum(dgates.reshape({rows, g4}), {0});
                       return Grads{dx,
                                    rh ? dh : Tensor(),
                                    rc ? dc : Tensor(),
                                    dwi,
                                    dwh,
                                    rbi ? db : Tensor(),
                                    rbh ? (rbi ? db.clone() : db) : Tensor()};
                     });
  }
  return {bf16 ? y.to(autocast::output_dtype(x.device())) : y, LstmState{h_last, c_last}};
}

}  // namespace octet
