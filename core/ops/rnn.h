// Recurrent ops, forward and backward: one LSTM step (lstm_cell, composed of autograd ops) and
// whole sequences. lstm_layer runs one LSTM layer the
// way cuDNN does: the input projection of every time step in one GEMM, then per step one GEMM for
// h W_hh^T and one fused pointwise kernel for the gates and the cell update (kernels::lstm_gates_*,
// core/cpu/rnn.cpp, core/cuda/rnn.cu); its backward is one fused kernel and one GEMM per step,
// then the weight gradients of all steps in one GEMM each. lstm_layer_reference computes the same
// from lstm_cell, step by step, through autograd: the plain path tests compare to.
//   auto [h1, c1] = lstm_cell(x, h0, c0, w_ih, w_hh, b_ih, b_hh);                 // x [B,I] -> h1 [B,H]
//   auto [y, last] = lstm_layer(x, LstmState{h0, c0}, w_ih, w_hh, b_ih, b_hh);  // x [T,B,I] -> y [T,B,H]
#pragma once

#include <utility>

#include "core/tensor.h"

namespace octet {

struct LstmState {
  Tensor h;
  Tensor c;
};
// One LSTM step (PyTorch's gate order i, f, g, o): x [B, I], h, c [B, H], w_ih [4H, I],
// w_hh [4H, H], biases [4H] (optional).
LstmState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih, const Tensor& w_hh,
                    const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());

// x [T, B, I] (time-major), state h, c [B, H] each (undefined: zeros), w_ih [4H, I], w_hh [4H, H],
// b_ih, b_hh [4H] (both or neither); gate order i, f, g, o as PyTorch. -> y [T, B, H] (every
// step's h) and the state after the last step. Differentiable in every tensor argument. T >= 1.
std::pair<Tensor, LstmState> lstm_layer(const Tensor& x, const LstmState& state, const Tensor& w_ih, const Tensor& w_hh,
                                        const Tensor& b_ih = Tensor(), const Tensor& b_hh = Tensor());
// The same result from lstm_cell, one recorded step at a time (slow; for tests).
std::pair<Tensor, LstmState> lstm_layer_reference(const Tensor& x, const LstmState& state, const Tensor& w_ih,
                                                  const Tensor& w_hh, const Tensor& b_ih = Tensor(),
                                                  const Tensor& b_hh = Tensor());

}  // namespace octet
