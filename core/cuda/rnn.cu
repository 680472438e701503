// CUDA LSTM step kernels, mirroring core/cpu/rnn.cpp: one thread per [B, H] element computes all
// four gates, the cell and the hidden state (forward), or the four gate gradients and dc_prev
// (backward), with the per-element math of core/rnn_math.h the CPU runs. The GEMMs around them
// (input projection, h W_hh^T per step, weight gradients) are cuBLAS calls made by lstm_layer.
#include <cstdint>
#include <limits>

#include "core/cuda/cuda_util.h"
#include "core/cuda/kernels.h"
#include "core/cuda/launch.cuh"
#include "core/kernel_checks.h"
#include "core/rnn_math.h"

namespace octet::cuda {

namespace {

template <typename T, typename I>
__global__ void lstm_gates_forward_kernel(T* __restrict__ gates, const T* __restrict__ bias,
                                          const T* __restrict__ c_prev, T* __restrict__ c, T* __restrict__ h, I hs,
                                          int64_t total) {
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const I e = static_cast<I>(k);
    const I b = e / hs, j = e - b * hs;
    c[e] = rnn::lstm_gates_forward_at(gates + static_cast<int64_t>(b) * 4 * hs, bias, hs, j, c_prev[e], h + e);
  }
}

// dc_next and dc_prev may be the same array (each thread reads its element before writing it), so
// neither is __restrict__; dy, dh_next and dc_next may be null (zero).
template <typename T, typename I>
__global__ void lstm_gates_backward_kernel(const T* __restrict__ act, const T* __restrict__ c_prev,
                                           const T* __restrict__ c, const T* __restrict__ dy,
                                           const T* __restrict__ dh_next, const T* dc_next, T* __restrict__ dgates,
                                           T* dc_prev, I hs, int64_t total) {
  for (int64_t k = first_index(); k < total; k += grid_stride()) {
    const I e = static_cast<I>(k);
    const I b = e / hs, j = e - b * hs;
    const T dh = (dy != nullptr ? dy[e] : T(0)) + (dh_next != nullptr ? dh_next[e] : T(0));
    const T dc = dc_next != nullptr ? dc_next[e] : T(0);
    const int64_t row = static_cast<int64_t>(b) * 4 * hs;
    dc_prev[e] = rnn::lstm_gates_backward_at(act + row, dgates + row, hs, j, c_prev[e], c[e], dh, dc);
  }
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Every element index of a gate row (b * 4H + 3H + j) fits in int32.
bool small_index(const Tensor& gates) { return gates.numel() <= std::numeric_limits<int32_t>::max(); }

}  // namespace

void lstm_gates_forward(const Tensor& gates, const Tensor& bias, const Tensor& c_prev, const Tensor& c,
                        const Tensor& h) {
  const int64_t hs = kernels::check_lstm_gates("lstm_gates_forward", gates, bias, {}, {c_prev, c, h});
  const int64_t total = gates.size(0) * hs;
  if (total == 0) return;
  dispatch_float_index("lstm_gates_forward", gates.dtype(), small_index(gates), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    lstm_gates_forward_kernel<T, I><<<grid_for(total), kThreads, 0, stream()>>>(
        gates.data<T>(), data_or_null<T>(bias), c_prev.data<T>(), c.data<T>(), h.data<T>(), static_cast<I>(hs), total);
    OCTET_CUDA_LAUNCH("lstm_gates_forward");
  });
}

void lstm_gates_backward(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dy,
                         const Tensor& dh_next, const Tensor& dc_next, const Tensor& dgates, const Tensor& dc_prev) {
  const int64_t hs = kernels::check_lstm_gates("lstm_gates_backward", act, Tensor(), {dgates}, {c_prev, c, dc_prev},
                                               {dy, dh_next, dc_next});
  const int64_t total = act.size(0) * hs;
  if (total == 0) return;
  dispatch_float_index("lstm_gates_backward", act.dtype(), small_index(act), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    lstm_gates_backward_kernel<T, I><<<grid_for(total), kThreads, 0, stream()>>>(
        act.data<T>(), c_prev.data<T>(), c.data<T>(), data_or_null<T>(dy), data_or_null<T>(dh_next),
        data_or_null<T>(dc_next), dgates.data<T>(), dc_prev.data<T>(), static_cast<I>(hs), total);
    OCTET_CUDA_LAUNCH("lstm_gates_backward");
  });
}

}  // namespace octet::cuda
