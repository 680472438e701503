// CPU LSTM step kernels: one pass over the batch's [B, H] elements computes all four gates, the
// cell and the hidden state (forward), or the four gate gradients and dc_prev (backward), with the
// per-element math of core/rnn_math.h, instead of the dozen elementwise ops of the composed cell.
// Rows are split across threads (each element is independent), so results never depend on them.
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/kernel_checks.h"
#include "core/rnn_math.h"

namespace octet::cpu {

namespace {

// Elements per thread chunk: each costs a few transcendental functions (~50-100 ns of work).
constexpr int64_t kGrain = 2048;

// fn(b, j) for every element of a [B, H] grid, split across threads in whole row pieces.
template <typename Fn>
void for_each_element(int64_t batch, int64_t hs, Fn&& fn) {
  parallel_for(0, batch * hs, kGrain, [&](int64_t begin, int64_t end) {
    int64_t b = begin / hs, j = begin % hs;
    for (int64_t k = begin; k < end; ++k) {
      fn(b, j);
      if (++j == hs) j = 0, ++b;
    }
  });
}

}  // namespace

void lstm_gates_forward(const Tensor& gates, const Tensor& bias, const Tensor& c_prev, const Tensor& c,
                        const Tensor& h) {
  check_cpu("lstm_gates_forward", {gates, bias, c_prev, c, h});
  const int64_t hs = kernels::check_lstm_gates("lstm_gates_forward", gates, bias, {}, {c_prev, c, h});
  dispatch_float(gates.dtype(), "lstm_gates_forward", [&]<typename T>() {
    T* pg = gates.data<T>();
    const T* pb = data_or_null<T>(bias);
    const T* pcp = c_prev.data<T>();
    T* pc = c.data<T>();
    T* ph = h.data<T>();
    for_each_element(gates.size(0), hs, [&](int64_t b, int64_t j) {
      const int64_t e = b * hs + j;
      pc[e] = rnn::lstm_gates_forward_at(pg + b * 4 * hs, pb, hs, j, pcp[e], ph + e);
    });
  });
}

void lstm_gates_backward(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dy,
                         const Tensor& dh_next, const Tensor& dc_next, const Tensor& dgates, const Tensor& dc_prev) {
  check_cpu("lstm_gates_backward", {act, c_prev, c, dy, dh_next, dc_next, dgates, dc_prev});
  const int64_t hs = kernels::check_lstm_gates("lstm_gates_backward", act, Tensor(), {dgates}, {c_prev, c, dc_prev},
                                               {dy, dh_next, dc_next});
  dispatch_float(act.dtype(), "lstm_gates_backward", [&]<typename T>() {
    const T* pa = act.data<T>();
    const T* pcp = c_prev.data<T>();
    const T* pc = c.data<T>();
    const T* pdy = data_or_null<T>(dy);
    const T* pdh = data_or_null<T>(dh_next);
    const T* pdc = data_or_null<T>(dc_next);  // may alias pdcp: read before written, per element
    T* pdg = dgates.data<T>();
    T* pdcp = dc_prev.data<T>();
    for_each_element(act.size(0), hs, [&](int64_t b, int64_t j) {
      const int64_t e = b * hs + j;
      const T dh = (pdy ? pdy[e] : T(0)) + (pdh ? pdh[e] : T(0));
      const T dc = pdc ? pdc[e] : T(0);
      pdcp[e] = rnn::lstm_gates_backward_at(pa + b * 4 * hs, pdg + b * 4 * hs, hs, j, pcp[e], pc[e], dh, dc);
    });
  });
}

}  // namespace octet::cpu
