// Scaled dot-product attention on the CPU (core/kernels.h attention_forward/backward), tiled with
// an online softmax as FlashAttention computes it, each tile's products one small GEMM (f32:
// oneDNN's sgemm; f64: a plain loop):
//   - forward: for a tile of query rows, the key tiles in turn: scores, the running row max m and
//     sum l (rescaling the output accumulator when m grows), then out = acc / l and
//     lse = m + log l. Only a kQueryTile x kKeyTile block of scores exists at a time;
//   - backward: D_i = dO_i . O_i, then for each key tile and query tile the probabilities again from
//     lse (P = exp(S - lse)), dV += P~^T dO, dS = P (dP - D), dQ += scale dS K, dK += scale dS^T Q,
//     where P~ is P with dropout applied and dP its gradient.
// Work is split over (batch, head) pairs, each one thread's, so no two threads write one row.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/vec_exp.h"
#include "core/generator.h"
#include "core/parallel.h"

namespace octet::cpu {
namespace {

constexpr int64_t kQueryTile = 32, kKeyTile = 64;

// The dropout draw of element ((bh * Tq) + i) * Tk + j, shared with the CUDA kernel and the
// reference path (core/ops/attention.h attention_dropout_keep).
bool keep(const AttentionGeometry& g, int64_t bh, int64_t i, int64_t j) {
  return dropout_keeps(g.seed, g.offset, static_cast<uint64_t>((bh * g.tq + i) * g.tk + j), g.dropout_p);
}

// The pointers of one (batch, head) pair.
template <typename T>
struct Head {
  const T *q, *k, *v;
  const uint8_t* pad;  // [Tk] or null
  int64_t bh;
};

template <typename T>
Head<T> head(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad,
             int64_t bh) {
  const int64_t b = bh / g.h;
  return {q.data<T>() + bh * g.tq * g.d, k.data<T>() + bh * g.tk * g.d, v.data<T>() + bh * g.tk * g.dv,
          pad.defined() ? pad.data<uint8_t>() + b * g.tk : nullptr, bh};
}

// C = alpha op(A) op(B) + beta C on one tile, row-major (op: transposed where `ta` / `tb`). f32 runs
// oneDNN's sgemm (inside the per-head threads it runs on the calling thread); f64, for gradient
// checks, a plain loop that sums over k in order.
void tile_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
               const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  OCTET_CHECK(st == dnnl_success, "attention: oneDNN sgemm failed with status ", static_cast<int>(st));
}

void tile_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
               const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t x = 0; x < k; ++x)
        sum += (ta ? a[x * lda + i] : a[i * lda + x]) * (tb ? b[j * ldb + x] : b[x * ldb + j]);
      c[i * ldc + j] = alpha * sum + (beta == 0 ? 0.0 : beta * c[i * ldc + j]);
    }
}

// The scaled scores of query rows [i0, i1) against keys [j0, j1) into s (row-major, kKeyTile per
// row), -inf where masked. Returns whether any is unmasked.
template <typename T>
bool scores(const AttentionGeometry& g, const Head<T>& hd, int64_t i0, int64_t i1, int64_t j0, int64_t j1, T* s) {
  tile_gemm(false, true, i1 - i0, j1 - j0, g.d, static_cast<T>(g.scale), hd.q + i0 * g.d, g.d, hd.k + j0 * g.d, g.d,
            T(0), s, kKeyTile);
  const T ninf = -std::numeric_limits<T>::infinity();
  if (!g.causal && hd.pad == nullptr) return true;
  bool any = false;
  for (int64_t i = i0; i < i1; ++i) {
    T* row = s + (i - i0) * kKeyTile;
    // Causal: the keys after i, a run at the row's end (none in a tile below the diagonal).
    const int64_t open_end = g.causal ? std::clamp(i + 1, j0, j1) : j1;
    std::fill(row + (open_end - j0), row + (j1 - j0), ninf);
    if (hd.pad == nullptr) {
      any = any || open_end > j0;
      continue;
    }
    for (int64_t j = j0; j < open_end; ++j) {
      if (hd.pad[j] != 0) row[j - j0] = ninf;
      any = any || hd.pad[j] == 0;
    }
  }
  return any;
}

// row[c] = exp(row[c] - m) for c < n (-inf entries give 0), vectorized for the active ISA.
template <typename T>
void exp_shifted(T* row, int64_t n, T m) {
  simd_dispatch([=] {
    for (int64_t c = 0; c < n; ++c) row[c] = vec_exp(row[c] - m);
  });
}

// One row's step of the online softmax over a key tile: the new max and sum, the accumulator
// rescaled, and the row's scores replaced by the weights P V takes (exp(s - m); 0 where masked or
// dropped; dropped-out ones kept scaled by 1/(1-p)).
template <typename T>
void online_softmax_row(const AttentionGeometry& g, const Head<T>& hd, int64_t i, int64_t j0, int64_t cols, T* row,
                        T& m, T& l, T* acc) {
  const T ninf = -std::numeric_limits<T>::infinity();
  T mx = ninf;
  for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, row[c]);
  const T m_new = std::max(m, mx);
  if (m_new == ninf) {  // every key so far masked
    std::fill(row, row + cols, T(0));
    return;
  }
  const T alpha = std::exp(m - m_new);  // 0 while m is -inf
  for (int64_t x = 0; x < g.dv; ++x) acc[x] *= alpha;
  const T drop_scale = static_cast<T>(1.0 / (1.0 - g.dropout_p));
  exp_shifted(row, cols, m_new);  // 0 where masked
  T sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += row[c];
  if (g.dropout_p > 0)
    for (int64_t c = 0; c < cols; ++c) row[c] = keep(g, hd.bh, i, j0 + c) ? row[c] * drop_scale : T(0);
  l = l * alpha + sum;
  m = m_new;
}

template <typename T>
void forward_head(const AttentionGeometry& g, const Head<T>& hd, T* out, T* lse) {
  const T ninf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(kQueryTile * kKeyTile), acc(kQueryTile * g.dv), m(kQueryTile), l(kQueryTile);
  for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
    const int64_t i1 = std::min(g.tq, i0 + kQueryTile), rows = i1 - i0;
    std::fill(m.begin(), m.end(), ninf);
    std::fill(l.begin(), l.end(), T(0));
    std::fill(acc.begin(), acc.end(), T(0));
    for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
      if (g.causal && j0 > i1 - 1) break;  // every later key is above the diagonal
      const int64_t j1 = std::min(g.tk, j0 + kKeyTile);
      if (!scores(g, hd, i0, i1, j0, j1, s.data())) continue;
      for (int64_t r = 0; r < rows; ++r)
        online_softmax_row(g, hd, i0 + r, j0, j1 - j0, s.data() + r * kKeyTile, m[r], l[r], acc.data() + r * g.dv);
      tile_gemm(false, false, rows, g.dv, j1 - j0, T(1), s.data(), kKeyTile, hd.v + j0 * g.dv, g.dv, T(1), acc.data(),
                g.dv);  // acc += P V
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* o = out + (i0 + r) * g.dv;
      const T* a = acc.data() + r * g.dv;
      if (l[r] == T(0)) {  // every key masked: 0, as PyTorch's safe softmax
        std::fill(o, o + g.dv, T(0));
        lse[i0 + r] = ninf;
        continue;
      }
      const T inv = T(1) / l[r];
      for (int64_t x = 0; x < g.dv; ++x) o[x] = a[x] * inv;
      lse[i0 + r] = m[r] + std::log(l[r]);
    }
  }
}

// The tile buffers of the backward: P (then P with dropout), dP, dS, each kQueryTile x kKeyTile.
template <typename T>
struct BackwardTiles {
  std::vector<T> p = std::vector<T>(kQueryTile * kKeyTile), dp = p, ds = p;
};

// For one tile: P = exp(S - lse) (0 in fully masked rows), dP = dO V^T, then P~ = P z (z: the
// dropout factor) into p and dS = P (z dP - delta) scale into ds.
template <typename T>
void backward_tile(const AttentionGeometry& g, const Head<T>& hd, const T* dout, const T* lse, const T* delta,
                   int64_t i0, int64_t i1, int64_t j0, int64_t j1, BackwardTiles<T>& t) {
  const T ninf = -std::numeric_limits<T>::infinity(), scale = static_cast<T>(g.scale);
  const T drop_scale = static_cast<T>(1.0 / (1.0 - g.dropout_p));
  const int64_t cols = j1 - j0;
  tile_gemm(false, true, i1 - i0, cols, g.dv, T(1), dout + i0 * g.dv, g.dv, hd.v + j0 * g.dv, g.dv, T(0), t.dp.data(),
            kKeyTile);
  for (int64_t i = i0; i < i1; ++i) {
    T* p = t.p.data() + (i - i0) * kKeyTile;
    T* ds = t.ds.data() + (i - i0) * kKeyTile;
    const T* dp = t.dp.data() + (i - i0) * kKeyTile;
    if (lse[i] == ninf)  // a fully masked row: no gradient
      std::fill(p, p + cols, T(0));
    else
      exp_shifted(p, cols, lse[i]);
    for (int64_t c = 0; c < cols; ++c) {
      const T pr = p[c];
      const T z = g.dropout_p > 0 ? (keep(g, hd.bh, i, j0 + c) ? drop_scale : T(0)) : T(1);
      ds[c] = pr * (z * dp[c] - delta[i]) * scale;
      p[c] = pr * z;
    }
  }
}

template <typename T>
void backward_head(const AttentionGeometry& g, const Head<T>& hd, const T* out, const T* dout, const T* lse, T* dq,
                   T* dk, T* dv) {
  std::vector<T> delta(g.tq);
  for (int64_t i = 0; i < g.tq; ++i) {
    T sum = 0;
    for (int64_t x = 0; x < g.dv; ++x) sum += dout[i * g.dv + x] * out[i * g.dv + x];
    delta[i] = sum;
  }
  if (dq) std::fill(dq, dq + g.tq * g.d, T(0));
  if (dk) std::fill(dk, dk + g.tk * g.d, T(0));
  if (dv) std::fill(dv, dv + g.tk * g.dv, T(0));
  BackwardTiles<T> t;
  for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
    const int64_t j1 = std::min(g.tk, j0 + kKeyTile), cols = j1 - j0;
    for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
      const int64_t i1 = std::min(g.tq, i0 + kQueryTile), rows = i1 - i0;
      if (g.causal && j0 > i1 - 1) continue;  // the tile is above the diagonal
      if (!scores(g, hd, i0, i1, j0, j1, t.p.data())) continue;
      backward_tile(g, hd, dout, lse, delta.data(), i0, i1, j0, j1, t);
      if (dv)  // dV += P~^T dO
        tile_gemm(true, false, cols, g.dv, rows, T(1), t.p.data(), kKeyTile, dout + i0 * g.dv, g.dv, T(1),
                  dv + j0 * g.dv, g.dv);
      if (dq)  // dQ += dS K
        tile_gemm(false, false, rows, g.d, cols, T(1), t.ds.data(), kKeyTile, hd.k + j0 * g.d, g.d, T(1), dq + i0 * g.d,
                  g.d);
      if (dk)  // dK += dS^T Q
        tile_gemm(true, false, cols, g.d, rows, T(1), t.ds.data(), kKeyTile, hd.q + i0 * g.d, g.d, T(1), dk + j0 * g.d,
                  g.d);
    }
  }
}

template <typename T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <typename T>
void forward_all(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad,
                 const Tensor& out, const Tensor& lse) {
  parallel_for(0, g.b * g.h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh)
      forward_head(g, head<T>(g, q, k, v, pad, bh), out.data<T>() + bh * g.tq * g.dv, lse.data<T>() + bh * g.tq);
  });
}

template <typename T>
void backward_all(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad,
                  const Tensor& out, const Tensor& dout, const Tensor& lse, const Tensor& dq, const Tensor& dk,
                  const Tensor& dv) {
  T *pdq = ptr_or_null<T>(dq), *pdk = ptr_or_null<T>(dk), *pdv = ptr_or_null<T>(dv);
  parallel_for(0, g.b * g.h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh)
      backward_head(g, head<T>(g, q, k, v, pad, bh), out.data<T>() + bh * g.tq * g.dv,
                    dout.data<T>() + bh * g.tq * g.dv, lse.data<T>() + bh * g.tq, pdq ? pdq + bh * g.tq * g.d : nullptr,
                    pdk ? pdk + bh * g.tk * g.d : nullptr, pdv ? pdv + bh * g.tk * g.dv : nullptr);
  });
}

}  // namespace

void attention_forward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_padding_mask, const Tensor& out, const Tensor& lse) {
  check_cpu("attention_forward", {q, k, v, out, lse});
  if (q.dtype() == DType::f64)
    forward_all<double>(g, q, k, v, key_padding_mask, out, lse);
  else
    forward_all<float>(g, q, k, v, key_padding_mask, out, lse);
}

void attention_backward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  check_cpu("attention_backward", {q, k, v, out, dout, lse});
  if (q.dtype() == DType::f64)
    backward_all<double>(g, q, k, v, key_padding_mask, out, dout, lse, dq, dk, dv);
  else
    backward_all<float>(g, q, k, v, key_padding_mask, out, dout, lse, dq, dk, dv);
}

}  // namespace octet::cpu
