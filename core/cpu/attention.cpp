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
//
// bf16 q, k, v (autocast's attention, core/autocast.h) compute as FlashAttention does in bf16: every
// product takes bf16 operands and sums in f32, so the probabilities P~ (forward: exp(S - m) with the
// running max; backward: from lse) and dS are rounded to bf16 before the products that take them;
// the softmax, its sums and lse stay f32, and the output is rounded once. On CPUs with AVX512-BF16
// the products run on bf16 operands (core/cpu/bf16_tile.h: K, V, Q and dO packed once per head, the
// gradients of K and V accumulated transposed); elsewhere (or OCTET_BF16=emulated) the f32 kernel
// runs on the widened operands with the same roundings: the same numbers up to summation order.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/bf16.h"
#include "core/cpu/bf16_tile.h"
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

// The scores of query rows [i0, i1) against keys [j0, j1) in s (row-major, kKeyTile per row) set
// to -inf where masked. Returns whether any is unmasked.
template <typename T>
bool mask_scores(const AttentionGeometry& g, const uint8_t* pad, int64_t i0, int64_t i1, int64_t j0, int64_t j1, T* s) {
  const T ninf = -std::numeric_limits<T>::infinity();
  if (!g.causal && pad == nullptr) return true;
  bool any = false;
  for (int64_t i = i0; i < i1; ++i) {
    T* row = s + (i - i0) * kKeyTile;
    // Causal: the keys after i, a run at the row's end (none in a tile below the diagonal).
    const int64_t open_end = g.causal ? std::clamp(i + 1, j0, j1) : j1;
    std::fill(row + (open_end - j0), row + (j1 - j0), ninf);
    if (pad == nullptr) {
      any = any || open_end > j0;
      continue;
    }
    for (int64_t j = j0; j < open_end; ++j) {
      if (pad[j] != 0) row[j - j0] = ninf;
      any = any || pad[j] == 0;
    }
  }
  return any;
}

// The scaled scores of query rows [i0, i1) against keys [j0, j1) into s, masked (mask_scores).
template <typename T>
bool scores(const AttentionGeometry& g, const Head<T>& hd, int64_t i0, int64_t i1, int64_t j0, int64_t j1, T* s) {
  tile_gemm(false, true, i1 - i0, j1 - j0, g.d, static_cast<T>(g.scale), hd.q + i0 * g.d, g.d, hd.k + j0 * g.d, g.d,
            T(0), s, kKeyTile);
  return mask_scores(g, hd.pad, i0, i1, j0, j1, s);
}

// x[c] rounded to bf16 in place for c < n (the emulated bf16 path's roundings); f64 never rounds.
void round_bf16_in_place(float* x, int64_t n) {
  simd_dispatch([=] {
    for (int64_t c = 0; c < n; ++c)
      x[c] = std::bit_cast<float>(static_cast<uint32_t>(bf16_bits(std::bit_cast<uint32_t>(x[c]))) << 16);
  });
}
void round_bf16_in_place(double*, int64_t) {}

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
void online_softmax_row(const AttentionGeometry& g, int64_t bh, int64_t i, int64_t j0, int64_t cols, T* row, T& m, T& l,
                        T* acc) {
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
    for (int64_t c = 0; c < cols; ++c) row[c] = keep(g, bh, i, j0 + c) ? row[c] * drop_scale : T(0);
  l = l * alpha + sum;
  m = m_new;
}

// One query tile's running state in the forward: the row max m, sum l and output accumulator.
template <typename T>
struct RowState {
  std::vector<T> acc, m, l;
  RowState(int64_t dv) : acc(kQueryTile * dv), m(kQueryTile), l(kQueryTile) {}
  void reset() {
    std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
    std::fill(l.begin(), l.end(), T(0));
    std::fill(acc.begin(), acc.end(), T(0));
  }
};

// A query tile's output rows out = acc / l (O: T, or bf16 rounded once) and their lse.
template <typename T, typename O>
void finish_rows(const AttentionGeometry& g, const RowState<T>& st, int64_t i0, int64_t rows, O* out, T* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    O* o = out + (i0 + r) * g.dv;
    const T* a = st.acc.data() + r * g.dv;
    if (st.l[r] == T(0)) {  // every key masked: 0, as PyTorch's safe softmax
      std::fill(o, o + g.dv, O(0.0f));
      lse[i0 + r] = -std::numeric_limits<T>::infinity();
      continue;
    }
    const T inv = T(1) / st.l[r];
    for (int64_t x = 0; x < g.dv; ++x) o[x] = O(a[x] * inv);
    lse[i0 + r] = st.m[r] + std::log(st.l[r]);
  }
}

// kRound: the emulated bf16 path (the weights P~ rounded to bf16 before P~ V).
template <typename T, bool kRound>
void forward_head(const AttentionGeometry& g, const Head<T>& hd, T* out, T* lse) {
  std::vector<T> s(kQueryTile * kKeyTile);
  RowState<T> st(g.dv);
  for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
    const int64_t i1 = std::min(g.tq, i0 + kQueryTile), rows = i1 - i0;
    st.reset();
    for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
      if (g.causal && j0 > i1 - 1) break;  // every later key is above the diagonal
      const int64_t j1 = std::min(g.tk, j0 + kKeyTile);
      if (!scores(g, hd, i0, i1, j0, j1, s.data())) continue;
      for (int64_t r = 0; r < rows; ++r) {
        T* row = s.data() + r * kKeyTile;
        online_softmax_row(g, hd.bh, i0 + r, j0, j1 - j0, row, st.m[r], st.l[r], st.acc.data() + r * g.dv);
        if (kRound) round_bf16_in_place(row, j1 - j0);
      }
      tile_gemm(false, false, rows, g.dv, j1 - j0, T(1), s.data(), kKeyTile, hd.v + j0 * g.dv, g.dv, T(1),
                st.acc.data(), g.dv);  // acc += P V
    }
    finish_rows(g, st, i0, rows, out, lse);
  }
}

// The tile buffers of the backward: P (then P with dropout), dP, dS, each kQueryTile x kKeyTile.
template <typename T>
struct BackwardTiles {
  std::vector<T> p = std::vector<T>(kQueryTile * kKeyTile), dp = p, ds = p;
};

// For one tile, with t.p holding the masked scores and t.dp = dO V^T: P = exp(S - lse) (0 in fully
// masked rows), then P~ = P z (z: the dropout factor) into p and dS = P (z dP - delta) scale into
// ds, each rounded to bf16 where kRound (the emulated bf16 path).
template <typename T, bool kRound>
void probabilities_and_ds(const AttentionGeometry& g, int64_t bh, const T* lse, const T* delta, int64_t i0, int64_t i1,
                          int64_t j0, int64_t j1, BackwardTiles<T>& t) {
  const T ninf = -std::numeric_limits<T>::infinity(), scale = static_cast<T>(g.scale);
  const T drop_scale = static_cast<T>(1.0 / (1.0 - g.dropout_p));
  const int64_t cols = j1 - j0;
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
      const T z = g.dropout_p > 0 ? (keep(g, bh, i, j0 + c) ? drop_scale : T(0)) : T(1);
      ds[c] = pr * (z * dp[c] - delta[i]) * scale;
      p[c] = pr * z;
    }
    if (kRound) {
      round_bf16_in_place(p, cols);
      round_bf16_in_place(ds, cols);
    }
  }
}

// D_i = dO_i . O_i, summed in f32 (f64) from O, dO of type S.
template <typename T, typename S>
std::vector<T> row_deltas(const AttentionGeometry& g, const S* out, const S* dout) {
  std::vector<T> delta(g.tq);
  for (int64_t i = 0; i < g.tq; ++i) {
    T sum = 0;
    for (int64_t x = 0; x < g.dv; ++x) sum += static_cast<T>(dout[i * g.dv + x]) * static_cast<T>(out[i * g.dv + x]);
    delta[i] = sum;
  }
  return delta;
}

template <typename T, bool kRound>
void backward_head(const AttentionGeometry& g, const Head<T>& hd, const T* out, const T* dout, const T* lse, T* dq,
                   T* dk, T* dv) {
  const std::vector<T> delta = row_deltas<T>(g, out, dout);
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
      tile_gemm(false, true, rows, cols, g.dv, T(1), dout + i0 * g.dv, g.dv, hd.v + j0 * g.dv, g.dv, T(0), t.dp.data(),
                kKeyTile);  // dP = dO V^T
      probabilities_and_ds<T, kRound>(g, hd.bh, lse, delta.data(), i0, i1, j0, j1, t);
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

// ---------------------------------------------------------------- bf16 products (AVX512-BF16)

// A packed B (core/cpu/bf16_tile.h) of [k, n] and where its (even) row k0 starts.
struct Packed {
  std::vector<uint32_t> words;
  int64_t ld = 0;
  Packed(int64_t k, int64_t n) : words(static_cast<size_t>(packed_words(k, n))), ld(packed_ld(n)) {}
  const uint32_t* at(int64_t k0, int64_t j0 = 0) const { return words.data() + k0 / 2 * ld + j0; }
};

// y[j][i] = x[i][j] for X [rows, cols] (row-major, dense) into Y [cols, rows], in blocks that stay
// in cache.
template <typename T>
void transpose(const T* x, int64_t rows, int64_t cols, T* y) {
  constexpr int64_t kBlock = 16;
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock)
      for (int64_t i = i0; i < std::min(rows, i0 + kBlock); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kBlock); ++j) y[j * rows + i] = x[i * cols + j];
}

std::vector<BFloat16> transposed(const BFloat16* x, int64_t rows, int64_t cols) {
  std::vector<BFloat16> out(static_cast<size_t>(rows * cols));
  transpose(x, rows, cols, out.data());
  return out;
}

// y[c] = bf16(x[c]) for c < n, on the calling thread.
void round_row(const float* x, BFloat16* y, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(y);
  simd_dispatch([=] {
    for (int64_t c = 0; c < n; ++c) out[c] = bf16_bits(std::bit_cast<uint32_t>(x[c]));
  });
}

// The scaled, masked scores of query rows [i0, i1) against keys [j0, j1) from bf16 Q and packed K^T.
bool scores_bf16(const AttentionGeometry& g, const Head<BFloat16>& hd, const Packed& kt, int64_t i0, int64_t i1,
                 int64_t j0, int64_t j1, float* s) {
  gemm_bf16_packed(i1 - i0, j1 - j0, g.d, static_cast<float>(g.scale), hd.q + i0 * g.d, g.d, kt.at(0, j0), kt.ld, false,
                   s, kKeyTile);
  return mask_scores(g, hd.pad, i0, i1, j0, j1, s);
}

// O: float or BFloat16, as the output tensor.
template <typename O>
void forward_head_bf16(const AttentionGeometry& g, const Head<BFloat16>& hd, O* out, float* lse) {
  Packed kt(g.d, g.tk), vp(g.tk, g.dv);
  pack_transposed(hd.k, g.tk, g.d, g.d, kt.words.data(), kt.ld);  // K^T for S = Q K^T
  pack_rows(hd.v, g.tk, g.dv, g.dv, vp.words.data(), vp.ld);      // V for P~ V
  std::vector<float> s(kQueryTile * kKeyTile);
  std::vector<BFloat16> pb(kQueryTile * kKeyTile);
  RowState<float> st(g.dv);
  for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
    const int64_t i1 = std::min(g.tq, i0 + kQueryTile), rows = i1 - i0;
    st.reset();
    for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
      if (g.causal && j0 > i1 - 1) break;
      const int64_t j1 = std::min(g.tk, j0 + kKeyTile), cols = j1 - j0;
      if (!scores_bf16(g, hd, kt, i0, i1, j0, j1, s.data())) continue;
      for (int64_t r = 0; r < rows; ++r) {
        float* row = s.data() + r * kKeyTile;
        online_softmax_row(g, hd.bh, i0 + r, j0, cols, row, st.m[r], st.l[r], st.acc.data() + r * g.dv);
        round_row(row, pb.data() + r * kKeyTile, cols);
      }
      gemm_bf16_packed(rows, g.dv, cols, 1.0f, pb.data(), kKeyTile, vp.at(j0), vp.ld, true, st.acc.data(),
                       g.dv);  // acc += P~ V
    }
    finish_rows(g, st, i0, rows, out, lse);
  }
}

// The backward from bf16 q, k, v, out and dout into f32 dq, dk, dv. Every operand is packed once per
// head; dK and dV are accumulated transposed (dK^T += Q^T dS, dV^T += dO^T P~), so that the tile's
// dS and P~ are the packed B operand (pairs of query rows) and Q^T, dO^T the row-major A.
void backward_head_bf16(const AttentionGeometry& g, const Head<BFloat16>& hd, const BFloat16* out, const BFloat16* dout,
                        const float* lse, float* dq, float* dk, float* dv) {
  const std::vector<float> delta = row_deltas<float>(g, out, dout);
  Packed kt(g.d, g.tk), vt(g.dv, g.tk), kp(g.tk, g.d), pp(kQueryTile, kKeyTile), sp(kQueryTile, kKeyTile);
  pack_transposed(hd.k, g.tk, g.d, g.d, kt.words.data(), kt.ld);    // K^T for S = Q K^T
  pack_transposed(hd.v, g.tk, g.dv, g.dv, vt.words.data(), vt.ld);  // V^T for dP = dO V^T
  if (dq) pack_rows(hd.k, g.tk, g.d, g.d, kp.words.data(), kp.ld);  // K for dQ += dS K
  const std::vector<BFloat16> qt = dk ? transposed(hd.q, g.tq, g.d) : std::vector<BFloat16>();
  const std::vector<BFloat16> dot = dv ? transposed(dout, g.tq, g.dv) : std::vector<BFloat16>();
  std::vector<float> dkt(dk ? g.d * g.tk : 0), dvt(dv ? g.dv * g.tk : 0);
  if (dq) std::fill(dq, dq + g.tq * g.d, 0.0f);
  std::vector<BFloat16> dsb(kQueryTile * kKeyTile);
  BackwardTiles<float> t;
  for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
    const int64_t j1 = std::min(g.tk, j0 + kKeyTile), cols = j1 - j0;
    for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
      const int64_t i1 = std::min(g.tq, i0 + kQueryTile), rows = i1 - i0;
      if (g.causal && j0 > i1 - 1) continue;
      if (!scores_bf16(g, hd, kt, i0, i1, j0, j1, t.p.data())) continue;
      gemm_bf16_packed(rows, cols, g.dv, 1.0f, dout + i0 * g.dv, g.dv, vt.at(0, j0), vt.ld, false, t.dp.data(),
                       kKeyTile);  // dP = dO V^T
      probabilities_and_ds<float, false>(g, hd.bh, lse, delta.data(), i0, i1, j0, j1, t);
      if (dv) {  // dV^T += dO^T P~
        pack_rows_rounded(t.p.data(), rows, cols, kKeyTile, pp.words.data(), pp.ld);
        gemm_bf16_packed(g.dv, cols, rows, 1.0f, dot.data() + i0, g.tq, pp.at(0), pp.ld, true, dvt.data() + j0, g.tk);
      }
      if (dk) {  // dK^T += Q^T dS
        pack_rows_rounded(t.ds.data(), rows, cols, kKeyTile, sp.words.data(), sp.ld);
        gemm_bf16_packed(g.d, cols, rows, 1.0f, qt.data() + i0, g.tq, sp.at(0), sp.ld, true, dkt.data() + j0, g.tk);
      }
      if (dq) {  // dQ += dS K
        for (int64_t r = 0; r < rows; ++r) round_row(t.ds.data() + r * kKeyTile, dsb.data() + r * kKeyTile, cols);
        gemm_bf16_packed(rows, g.d, cols, 1.0f, dsb.data(), kKeyTile, kp.at(j0), kp.ld, true, dq + i0 * g.d, g.d);
      }
    }
  }
  if (dk) transpose(dkt.data(), g.d, g.tk, dk);
  if (dv) transpose(dvt.data(), g.dv, g.tk, dv);
}

// ---------------------------------------------------------------- dispatch over (batch, head) pairs

template <typename T>
T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <typename T, bool kRound>
void forward_all(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad,
                 const Tensor& out, const Tensor& lse) {
  parallel_for(0, g.b * g.h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh)
      forward_head<T, kRound>(g, head<T>(g, q, k, v, pad, bh), out.data<T>() + bh * g.tq * g.dv,
                              lse.data<T>() + bh * g.tq);
  });
}

template <typename T, bool kRound>
void backward_all(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad,
                  const Tensor& out, const Tensor& dout, const Tensor& lse, const Tensor& dq, const Tensor& dk,
                  const Tensor& dv) {
  T *pdq = ptr_or_null<T>(dq), *pdk = ptr_or_null<T>(dk), *pdv = ptr_or_null<T>(dv);
  parallel_for(0, g.b * g.h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh)
      backward_head<T, kRound>(g, head<T>(g, q, k, v, pad, bh), out.data<T>() + bh * g.tq * g.dv,
                               dout.data<T>() + bh * g.tq * g.dv, lse.data<T>() + bh * g.tq,
                               pdq ? pdq + bh * g.tq * g.d : nullptr, pdk ? pdk + bh * g.tk * g.d : nullptr,
                               pdv ? pdv + bh * g.tk * g.dv : nullptr);
  });
}

// The bf16 products on bf16 operands, or the emulated path's widened ones (core/cpu/isa.h).
bool native_bf16() { return bf16_selector().active() == Bf16Path::native && bf16_tiles_supported(); }

// A bf16 tensor widened to f32 (defined or not); f32 unchanged.
Tensor as_f32(const Tensor& t) { return t.defined() && t.dtype() == DType::bf16 ? widened_to_f32(t) : t; }

}  // namespace

// bf16 q, k, v write a bf16 or f32 out; lse is f32. dout and out are then bf16 too, and dq, dk, dv
// f32. f32 operands with g.round_bf16 run the emulated bf16 path as they are.
void attention_forward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_padding_mask, const Tensor& out, const Tensor& lse) {
  check_cpu("attention_forward", {q, k, v, out, lse});
  if (q.dtype() == DType::f64) return forward_all<double, false>(g, q, k, v, key_padding_mask, out, lse);
  if (q.dtype() != DType::bf16)
    return g.round_bf16 ? forward_all<float, true>(g, q, k, v, key_padding_mask, out, lse)
                        : forward_all<float, false>(g, q, k, v, key_padding_mask, out, lse);
  OCTET_CHECK(k.dtype() == DType::bf16 && v.dtype() == DType::bf16 && lse.dtype() == DType::f32 &&
                  (out.dtype() == DType::bf16 || out.dtype() == DType::f32),
              "attention_forward: bf16 q takes bf16 k, v, an f32 lse and a bf16 or f32 out");
  if (!native_bf16()) {
    const Tensor out32 = out.dtype() == DType::f32 ? out : empty_f32_like(out);
    forward_all<float, true>(g, as_f32(q), as_f32(k), as_f32(v), key_padding_mask, out32, lse);
    if (out.dtype() != DType::f32) copy(out, out32);
    return;
  }
  parallel_for(0, g.b * g.h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const Head<BFloat16> hd = head<BFloat16>(g, q, k, v, key_padding_mask, bh);
      if (out.dtype() == DType::bf16)
        forward_head_bf16(g, hd, out.data<BFloat16>() + bh * g.tq * g.dv, lse.data<float>() + bh * g.tq);
      else
        forward_head_bf16(g, hd, out.data<float>() + bh * g.tq * g.dv, lse.data<float>() + bh * g.tq);
    }
  });
}

void attention_backward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  check_cpu("attention_backward", {q, k, v, out, dout, lse});
  if (q.dtype() == DType::f64)
    return backward_all<double, false>(g, q, k, v, key_padding_mask, out, dout, lse, dq, dk, dv);
  if (q.dtype() != DType::bf16)
    return g.round_bf16 ? backward_all<float, true>(g, q, k, v, key_padding_mask, out, dout, lse, dq, dk, dv)
                        : backward_all<float, false>(g, q, k, v, key_padding_mask, out, dout, lse, dq, dk, dv);
  OCTET_CHECK(k.dtype() == DType::bf16 && v.dtype() == DType::bf16 && out.dtype() == DType::bf16 &&
                  dout.dtype() == DType::bf16 && lse.dtype() == DType::f32,
              "attention_backward: bf16 q takes bf16 k, v, out, dout and an f32 lse");
  for (const Tensor& t : {dq, dk, dv})
    OCTET_CHECK(!t.defined() || t.dtype() == DType::f32, "attention_backward: bf16 q takes f32 dq, dk, dv");
  if (!native_bf16())
    return backward_all<float, true>(g, as_f32(q), as_f32(k), as_f32(v), key_padding_mask, as_f32(out), as_f32(dout),
                                     lse, dq, dk, dv);
  float *pdq = ptr_or_null<float>(dq), *pdk = ptr_or_null<float>(dk), *pdv = ptr_or_null<float>(dv);
  parallel_for(0, g.b * g.h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh)
      backward_head_bf16(g, head<BFloat16>(g, q, k, v, key_padding_mask, bh), out.data<BFloat16>() + bh * g.tq * g.dv,
                         dout.data<BFloat16>() + bh * g.tq * g.dv, lse.data<float>() + bh * g.tq,
                         pdq ? pdq + bh * g.tq * g.d : nullptr, pdk ? pdk + bh * g.tk * g.d : nullptr,
                         pdv ? pdv + bh * g.tk * g.dv : nullptr);
  });
}

}  // namespace octet::cpu
