// The per-element math of an LSTM step (PyTorch's gate order i, f, g, o), shared by the fused CPU
// and CUDA kernels (core/cpu/rnn.cpp, core/cuda/rnn.cu) so both compute one formula. Element j of
// a row of the gate matrix [B, 4H] has its four gates at j, H + j, 2H + j and 3H + j.
//   forward:  i, f, o = sigmoid(z); g = tanh(z_g); c = f c_prev + i g; h = o tanh(c)
//   backward: dc = dc_next + dh o (1 - tanh(c)^2); dz_i = dc g i (1 - i); dz_f = dc c_prev f (1 - f);
//             dz_g = dc i (1 - g^2); dz_o = dh tanh(c) o (1 - o); dc_prev = dc f
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hostdevice.h"

namespace octet::rnn {

// Split by sign so exp never overflows (the same formula as the sigmoid op).
template <typename T>
OCTET_HD inline T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// Element j of one row: `gates` holds the row's pre-activations (without bias; `bias` [4H] may
// be null) and gets the activations i, f, g, o in their place. Returns c; h is written to *h.
// I: the index type (int32 where it fits, for the GPU's cheaper arithmetic).
template <typename T, typename I>
OCTET_HD inline T lstm_gates_forward_at(T* gates, const T* bias, I hs, I j, T c_prev, T* h) {
  T zi = gates[j], zf = gates[hs + j], zg = gates[2 * hs + j], zo = gates[3 * hs + j];
  if (bias != nullptr) {
    zi += bias[j];
    zf += bias[hs + j];
    zg += bias[2 * hs + j];
    zo += bias[3 * hs + j];
  }
  const T i = sigmoid(zi), f = sigmoid(zf), g = std::tanh(zg), o = sigmoid(zo);
  gates[j] = i;
  gates[hs + j] = f;
  gates[2 * hs + j] = g;
  gates[3 * hs + j] = o;
  const T c = f * c_prev + i * g;
  *h = o * std::tanh(c);
  return c;
}

// Element j of one row of the backward: `act` holds the row's activations from the forward,
// dh the gradient reaching h, dc_next the one reaching c from the later step (or the final state).
// Writes the four pre-activation gradients to dgates and returns dc_prev.
template <typename T, typename I>
OCTET_HD inline T lstm_gates_backward_at(const T* act, T* dgates, I hs, I j, T c_prev, T c, T dh, T dc_next) {
  const T i = act[j], f = act[hs + j], g = act[2 * hs + j], o = act[3 * hs + j];
  const T tc = std::tanh(c);
  const T dc = dc_next + dh * o * (T(1) - tc * tc);
  dgates[j] = dc * g * i * (T(1) - i);
  dgates[hs + j] = dc * c_prev * f * (T(1) - f);
  dgates[2 * hs + j] = dc * i * (T(1) - g * g);
  dgates[3 * hs + j] = dh * tc * o * (T(1) - o);
  return dc * f;
}

}  // namespace octet::rnn
