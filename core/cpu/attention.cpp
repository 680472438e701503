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
#include "core/cpu/philox.h"
#include "core/cpu/vec_exp.h"
#include "core/generator.h"
#include "core/parallel.h"

namespace octet::cpu {
namespace {

constexpr int64_t kQueryTile = 32, kKeyTile = 64;

// The dropout factors of row i's keys [j0, j0 + cols), cols <= kKeyTile: 1/(1-p) where kept, 0
// where dropped. Element ((bh * Tq) + i) * Tk + j draws as dropout_keeps (core/generator.h), as the
// CUDA kernel and the reference path (attention_dropout_keep) do; the row's draws come at once
// from the vectorized Philox (one per element inline had cost as much as the attention itself).
template <typename T>
void dropout_factors(const AttentionGeometry& g, int64_t bh, int64_t i, int64_t j0, int64_t cols, T* z) {
  uint32_t words[kKeyTile];
  philox_first_words(g.seed, g.offset + static_cast<uint64_t>((bh * g.tq + i) * g.tk + j0), cols, words);
  const uint32_t threshold = dropout_threshold(g.dropout_p);
  const T scale = static_cast<T>(1.0 / (1.0 - g.dropout_p));
  for (int64_t c = 0; c < cols; ++c) z[c] = dropout_keeps_word(words[c], threshold) ? scale : T(0);
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
  exp_shifted(row, cols, m_new);  // 0 where masked
  T sum = 0;
  for (int64_t c = 0; c < cols; ++c) sum += row[c];
  if (g.dropout_p > 0) {
    T z[kKeyTile];
    dropout_factors(g, bh, i, j0, cols, z);
    for (int64_t c = 0; c < cols; ++c) row[c] = z[c] != T(0) ? row[c] * z[c] : T(0);
  }
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
  const int64_t cols = j1 - j0;
  T z[kKeyTile];
  if (g.dropout_p == 0) std::fill(z, z + cols, T(1));
  for (int64_t i = i0; i < i1; ++i) {
    T* p = t.p.data() + (i - i0) * kKeyTile;
    T* ds = t.ds.data() + (i - i0) * kKeyTile;
    const T* dp = t.dp.data() + (i - i0) * kKeyTile;
    if (lse[i] == ninf)  // a fully masked row: no gradient
      std::fill(p, p + cols, T(0));
    else
      exp_shifted(p, cols, lse[i]);
    if (g.dropout_p > 0) dropout_factors(g, bh, i, j0, cols, z);
    for (int64_t c = 0; c < cols; ++c) {
      const T pr = p[c];
      ds[c] = pr * (z[c] * dp[c] - delta[i]) * scale;
      p[c] = pr * z[c];
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

// ---------------------------------------------------------------- the products of one head

// The tiled loops (forward_tiles, backward_tiles) run on two kinds of products of one head:
// TileProducts (the f32 and f64 kernel: tile GEMMs on the operands; kRound: the emulated bf16 path,
// P~ and dS rounded to bf16 in place before their products) and Bf16Products (bf16 operands on
// AVX512-BF16). Each gives a tile's scaled, masked scores; weigh() adds P~ V to the forward's
// accumulator; in the backward, dp() gives dO V^T, accumulate() adds the tile's part of dV, dQ and
// dK, and finish() writes what it kept aside.
template <typename T, bool kRound>
class TileProducts {
 public:
  static constexpr bool kRounds = kRound;
  TileProducts(const AttentionGeometry& g, const Head<T>& hd) : g_(g), hd_(hd) {}

  bool scores(int64_t i0, int64_t i1, int64_t j0, int64_t j1, T* s) const {
    tile_gemm(false, true, i1 - i0, j1 - j0, g_.d, static_cast<T>(g_.scale), hd_.q + i0 * g_.d, g_.d, hd_.k + j0 * g_.d,
              g_.d, T(0), s, kKeyTile);
    return mask_scores(g_, hd_.pad, i0, i1, j0, j1, s);
  }
  // acc += P~ V over the tile's keys, p holding P~ (kKeyTile per row).
  void weigh(int64_t rows, int64_t j0, int64_t cols, T* p, T* acc) const {
    if (kRound)
      for (int64_t r = 0; r < rows; ++r) round_bf16_in_place(p + r * kKeyTile, cols);
    tile_gemm(false, false, rows, g_.dv, cols, T(1), p, kKeyTile, hd_.v + j0 * g_.dv, g_.dv, T(1), acc, g_.dv);
  }

  void start_backward(const T* dout, T* dq, T* dk, T* dv) {
    dout_ = dout, dq_ = dq, dk_ = dk, dv_ = dv;
    if (dq) std::fill(dq, dq + g_.tq * g_.d, T(0));
    if (dk) std::fill(dk, dk + g_.tk * g_.d, T(0));
    if (dv) std::fill(dv, dv + g_.tk * g_.dv, T(0));
  }
  void dp(int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* dp) const {
    tile_gemm(false, true, rows, cols, g_.dv, T(1), dout_ + i0 * g_.dv, g_.dv, hd_.v + j0 * g_.dv, g_.dv, T(0), dp,
              kKeyTile);
  }
  void accumulate(int64_t i0, int64_t rows, int64_t j0, int64_t cols, const BackwardTiles<T>& t) const {
    if (dv_)  // dV += P~^T dO
      tile_gemm(true, false, cols, g_.dv, rows, T(1), t.p.data(), kKeyTile, dout_ + i0 * g_.dv, g_.dv, T(1),
                dv_ + j0 * g_.dv, g_.dv);
    if (dq_)  // dQ += dS K
      tile_gemm(false, false, rows, g_.d, cols, T(1), t.ds.data(), kKeyTile, hd_.k + j0 * g_.d, g_.d, T(1),
                dq_ + i0 * g_.d, g_.d);
    if (dk_)  // dK += dS^T Q
      tile_gemm(true, false, cols, g_.d, rows, T(1), t.ds.data(), kKeyTile, hd_.q + i0 * g_.d, g_.d, T(1),
                dk_ + j0 * g_.d, g_.d);
  }
  void finish() const {}

 private:
  const AttentionGeometry& g_;
  Head<T> hd_;
  const T* dout_ = nullptr;
  T *dq_ = nullptr, *dk_ = nullptr, *dv_ = nullptr;
};

// A packed B (core/cpu/bf16_tile.h) of [k, n] and where its (even) row k0 starts.
struct Packed {
  std::vector<uint32_t> words;
  int64_t ld = 0;
  Packed() = default;
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

// y[c] = bf16(x[c]) for c < n, on the calling thread.
void round_row(const float* x, BFloat16* y, int64_t n) {
  auto* out = reinterpret_cast<uint16_t*>(y);
  simd_dispatch([=] {
    for (int64_t c = 0; c < n; ++c) out[c] = bf16_bits(std::bit_cast<uint32_t>(x[c]));
  });
}

// Every operand is packed once per head: K^T for S = Q K^T; V for P~ V; in the backward V^T for
// dP = dO V^T and K for dQ += dS K, and dK, dV accumulated transposed (dK^T += Q^T dS,
// dV^T += dO^T P~), so that the tile's dS and P~ are the packed B operand (pairs of query rows)
// and Q^T, dO^T the row-major A. P~ and dS are rounded to bf16 as they are packed.
class Bf16Products {
 public:
  static constexpr bool kRounds = false;  // packing rounds
  Bf16Products(const AttentionGeometry& g, const Head<BFloat16>& hd) : g_(g), hd_(hd), kt_(g.d, g.tk) {
    pack_transposed(hd.k, g.tk, g.d, g.d, kt_.words.data(), kt_.ld);
  }

  bool scores(int64_t i0, int64_t i1, int64_t j0, int64_t j1, float* s) const {
    gemm_bf16_packed(i1 - i0, j1 - j0, g_.d, static_cast<float>(g_.scale), hd_.q + i0 * g_.d, g_.d, kt_.at(0, j0),
                     kt_.ld, false, s, kKeyTile);
    return mask_scores(g_, hd_.pad, i0, i1, j0, j1, s);
  }
  void start_forward() {
    vp_ = Packed(g_.tk, g_.dv);
    pack_rows(hd_.v, g_.tk, g_.dv, g_.dv, vp_.words.data(), vp_.ld);
  }
  void weigh(int64_t rows, int64_t j0, int64_t cols, const float* p, float* acc) {
    for (int64_t r = 0; r < rows; ++r) round_row(p + r * kKeyTile, tile_.data() + r * kKeyTile, cols);
    gemm_bf16_packed(rows, g_.dv, cols, 1.0f, tile_.data(), kKeyTile, vp_.at(j0), vp_.ld, true, acc, g_.dv);
  }

  void start_backward(const BFloat16* dout, float* dq, float* dk, float* dv) {
    dout_ = dout, dq_ = dq, dk_ = dk, dv_ = dv;
    vt_ = Packed(g_.dv, g_.tk);
    pack_transposed(hd_.v, g_.tk, g_.dv, g_.dv, vt_.words.data(), vt_.ld);
    if (dq) {
      kp_ = Packed(g_.tk, g_.d);
      pack_rows(hd_.k, g_.tk, g_.d, g_.d, kp_.words.data(), kp_.ld);
      std::fill(dq, dq + g_.tq * g_.d, 0.0f);
    }
    if (dk) {
      qt_.resize(static_cast<size_t>(g_.tq * g_.d));
      transpose(hd_.q, g_.tq, g_.d, qt_.data());
      dkt_.assign(static_cast<size_t>(g_.d * g_.tk), 0.0f);
    }
    if (dv) {
      dot_.resize(static_cast<size_t>(g_.tq * g_.dv));
      transpose(dout, g_.tq, g_.dv, dot_.data());
      dvt_.assign(static_cast<size_t>(g_.dv * g_.tk), 0.0f);
    }
    pairs_ = Packed(kQueryTile, kKeyTile);
  }
  void dp(int64_t i0, int64_t rows, int64_t j0, int64_t cols, float* dp) const {
    gemm_bf16_packed(rows, cols, g_.dv, 1.0f, dout_ + i0 * g_.dv, g_.dv, vt_.at(0, j0), vt_.ld, false, dp, kKeyTile);
  }
  void accumulate(int64_t i0, int64_t rows, int64_t j0, int64_t cols, const BackwardTiles<float>& t) {
    if (dv_) {  // dV^T += dO^T P~
      pack_rows_rounded(t.p.data(), rows, cols, kKeyTile, pairs_.words.data(), pairs_.ld);
      gemm_bf16_packed(g_.dv, cols, rows, 1.0f, dot_.data() + i0, g_.tq, pairs_.at(0), pairs_.ld, true,
                       dvt_.data() + j0, g_.tk);
    }
    if (dk_) {  // dK^T += Q^T dS
      pack_rows_rounded(t.ds.data(), rows, cols, kKeyTile, pairs_.words.data(), pairs_.ld);
      gemm_bf16_packed(g_.d, cols, rows, 1.0f, qt_.data() + i0, g_.tq, pairs_.at(0), pairs_.ld, true, dkt_.data() + j0,
                       g_.tk);
    }
    if (dq_) {  // dQ += dS K
      for (int64_t r = 0; r < rows; ++r) round_row(t.ds.data() + r * kKeyTile, tile_.data() + r * kKeyTile, cols);
      gemm_bf16_packed(rows, g_.d, cols, 1.0f, tile_.data(), kKeyTile, kp_.at(j0), kp_.ld, true, dq_ + i0 * g_.d, g_.d);
    }
  }
  void finish() const {
    if (dk_) transpose(dkt_.data(), g_.d, g_.tk, dk_);
    if (dv_) transpose(dvt_.data(), g_.dv, g_.tk, dv_);
  }

 private:
  const AttentionGeometry& g_;
  Head<BFloat16> hd_;
  Packed kt_, vp_, vt_, kp_, pairs_;
  std::vector<BFloat16> tile_ = std::vector<BFloat16>(kQueryTile * kKeyTile), qt_, dot_;
  std::vector<float> dkt_, dvt_;
  const BFloat16* dout_ = nullptr;
  float *dq_ = nullptr, *dk_ = nullptr, *dv_ = nullptr;
};

// ---------------------------------------------------------------- the tiled loops

// One head's forward: out (O: T, or bf16 rounded once) and lse.
template <typename T, typename Products, typename O>
void forward_tiles(const AttentionGeometry& g, int64_t bh, Products& prod, O* out, T* lse) {
  std::vector<T> s(kQueryTile * kKeyTile);
  RowState<T> st(g.dv);
  for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
    const int64_t i1 = std::min(g.tq, i0 + kQueryTile), rows = i1 - i0;
    st.reset();
    for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
      if (g.causal && j0 > i1 - 1) break;  // every later key is above the diagonal
      const int64_t j1 = std::min(g.tk, j0 + kKeyTile), cols = j1 - j0;
      if (!prod.scores(i0, i1, j0, j1, s.data())) continue;
      for (int64_t r = 0; r < rows; ++r)
        online_softmax_row(g, bh, i0 + r, j0, cols, s.data() + r * kKeyTile, st.m[r], st.l[r],
                           st.acc.data() + r * g.dv);
      prod.weigh(rows, j0, cols, s.data(), st.acc.data());  // acc += P~ V
    }
    finish_rows(g, st, i0, rows, out, lse);
  }
}

// One head's backward (after prod.start_backward), out and dout of type S.
template <typename T, typename Products, typename S>
void backward_tiles(const AttentionGeometry& g, int64_t bh, Products& prod, const S* out, const S* dout, const T* lse) {
  const std::vector<T> delta = row_deltas<T>(g, out, dout);
  BackwardTiles<T> t;
  for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
    const int64_t j1 = std::min(g.tk, j0 + kKeyTile), cols = j1 - j0;
    for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
      const int64_t i1 = std::min(g.tq, i0 + kQueryTile), rows = i1 - i0;
      if (g.causal && j0 > i1 - 1) continue;  // the tile is above the diagonal
      if (!prod.scores(i0, i1, j0, j1, t.p.data())) continue;
      prod.dp(i0, rows, j0, cols, t.dp.data());  // dP = dO V^T
      probabilities_and_ds<T, Products::kRounds>(g, bh, lse, delta.data(), i0, i1, j0, j1, t);
      prod.accumulate(i0, rows, j0, cols, t);
    }
  }
  prod.finish();
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
    for (int64_t bh = begin; bh < end; ++bh) {
      TileProducts<T, kRound> prod(g, head<T>(g, q, k, v, pad, bh));
      forward_tiles(g, bh, prod, out.data<T>() + bh * g.tq * g.dv, lse.data<T>() + bh * g.tq);
    }
  });
}

template <typename T, bool kRound>
void backward_all(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad,
                  const Tensor& out, const Tensor& dout, const Tensor& lse, const Tensor& dq, const Tensor& dk,
                  const Tensor& dv) {
  T *pdq = ptr_or_null<T>(dq), *pdk = ptr_or_null<T>(dk), *pdv = ptr_or_null<T>(dv);
  parallel_for(0, g.b * g.h, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      TileProducts<T, kRound> prod(g, head<T>(g, q, k, v, pad, bh));
      const T* o = dout.data<T>() + bh * g.tq * g.dv;
      prod.start_backward(o, pdq ? pdq + bh * g.tq * g.d : nullptr, pdk ? pdk + bh * g.tk * g.d : nullptr,
                          pdv ? pdv + bh * g.tk * g.dv : nullptr);
      backward_tiles(g, bh, prod, out.data<T>() + bh * g.tq * g.dv, o, lse.data<T>() + bh * g.tq);
    }
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
      Bf16Products prod(g, head<BFloat16>(g, q, k, v, key_padding_mask, bh));
      prod.start_forward();
      if (out.dtype() == DType::bf16)
        forward_tiles(g, bh, prod, out.data<BFloat16>() + bh * g.tq * g.dv, lse.data<float>() + bh * g.tq);
      else
        forward_tiles(g, bh, prod, out.data<float>() + bh * g.tq * g.dv, lse.data<float>() + bh * g.tq);
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
    for (int64_t bh = begin; bh < end; ++bh) {
      Bf16Products prod(g, head<BFloat16>(g, q, k, v, key_padding_mask, bh));
      const BFloat16* o = dout.data<BFloat16>() + bh * g.tq * g.dv;
      prod.start_backward(o, pdq ? pdq + bh * g.tq * g.d : nullptr, pdk ? pdk + bh * g.tk * g.d : nullptr,
                          pdv ? pdv + bh * g.tk * g.dv : nullptr);
      backward_tiles(g, bh, prod, out.data<BFloat16>() + bh * g.tq * g.dv, o, lse.data<float>() + bh * g.tq);
    }
  });
}

}  // namespace octet::cpu
