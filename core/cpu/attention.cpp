// Scaled dot-product attention on the CPU (core/kernels.h attention_forward/backward), tiled with
// an online softmax as FlashAttention computes it:
//   - forward: for a tile of query rows, the key tiles in turn: scores, the running row max m and
//     sum l (rescaling the output accumulator when m grows), then out = acc / l and
//     lse = m + log l. Only a kQueryTile x kKeyTile block of scores exists at a time;
//   - backward: D_i = dO_i . O_i, then for each key tile and query tile the probabilities again from
//     lse (P = exp(S - lse)), dV += P~^T dO, dS = P (dP - D), dQ += scale dS K, dK += scale dS^T Q,
//     where P~ is P with dropout applied and dP its gradient.
// Work is split over (batch, head) pairs, each one thread's, so no two threads write one row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
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

// Eight running sums (a vector's lanes: the compiler keeps them in one register), then a fixed tree.
template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T s[8] = {};
  int64_t x = 0;
  for (; x + 8 <= n; x += 8)
    for (int u = 0; u < 8; ++u) s[u] += a[x + u] * b[x + u];
  T tail = 0;
  for (; x < n; ++x) tail += a[x] * b[x];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

// Scaled scores of query rows [i0, i1) against keys [j0, j1) into s (row-major, kKeyTile per row),
// -inf where masked. Returns whether any is unmasked.
template <typename T>
bool scores(const AttentionGeometry& g, const Head<T>& hd, int64_t i0, int64_t i1, int64_t j0, int64_t j1, T* s) {
  const T scale = static_cast<T>(g.scale), ninf = -std::numeric_limits<T>::infinity();
  bool any = false;
  for (int64_t i = i0; i < i1; ++i) {
    T* row = s + (i - i0) * kKeyTile;
    for (int64_t j = j0; j < j1; ++j) {
      const bool masked = (g.causal && j > i) || (hd.pad != nullptr && hd.pad[j] != 0);
      row[j - j0] = masked ? ninf : scale * dot(hd.q + i * g.d, hd.k + j * g.d, g.d);
      any = any || !masked;
    }
  }
  return any;
}

template <typename T>
void forward_head(const AttentionGeometry& g, const Head<T>& hd, T* out, T* lse) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const T drop_scale = static_cast<T>(1.0 / (1.0 - g.dropout_p));
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
      for (int64_t r = 0; r < rows; ++r) {
        T* row = s.data() + r * kKeyTile;
        T mx = ninf;
        for (int64_t c = 0; c < j1 - j0; ++c) mx = std::max(mx, row[c]);
        const T m_new = std::max(m[r], mx);
        if (m_new == ninf) continue;             // every key so far masked
        const T alpha = std::exp(m[r] - m_new);  // 0 while m[r] is -inf
        T* a = acc.data() + r * g.dv;
        for (int64_t x = 0; x < g.dv; ++x) a[x] *= alpha;
        T sum = 0;
        for (int64_t c = 0; c < j1 - j0; ++c) {
          const T p = std::exp(row[c] - m_new);  // 0 where masked
          sum += p;
          if (p == T(0) || (g.dropout_p > 0 && !keep(g, hd.bh, i0 + r, j0 + c))) continue;
          const T w = g.dropout_p > 0 ? p * drop_scale : p;
          const T* vj = hd.v + (j0 + c) * g.dv;
          for (int64_t x = 0; x < g.dv; ++x) a[x] += w * vj[x];
        }
        l[r] = l[r] * alpha + sum;
        m[r] = m_new;
      }
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

template <typename T>
void backward_head(const AttentionGeometry& g, const Head<T>& hd, const T* out, const T* dout, const T* lse, T* dq,
                   T* dk, T* dv) {
  const T ninf = -std::numeric_limits<T>::infinity(), scale = static_cast<T>(g.scale);
  const T drop_scale = static_cast<T>(1.0 / (1.0 - g.dropout_p));
  std::vector<T> s(kQueryTile * kKeyTile), delta(g.tq);
  for (int64_t i = 0; i < g.tq; ++i) delta[i] = dot(dout + i * g.dv, out + i * g.dv, g.dv);
  if (dq) std::fill(dq, dq + g.tq * g.d, T(0));
  if (dk) std::fill(dk, dk + g.tk * g.d, T(0));
  if (dv) std::fill(dv, dv + g.tk * g.dv, T(0));
  for (int64_t j0 = 0; j0 < g.tk; j0 += kKeyTile) {
    const int64_t j1 = std::min(g.tk, j0 + kKeyTile);
    for (int64_t i0 = 0; i0 < g.tq; i0 += kQueryTile) {
      const int64_t i1 = std::min(g.tq, i0 + kQueryTile);
      if (g.causal && j0 > i1 - 1) continue;  // the tile is above the diagonal
      if (!scores(g, hd, i0, i1, j0, j1, s.data())) continue;
      for (int64_t i = i0; i < i1; ++i) {
        if (lse[i] == ninf) continue;  // a fully masked row: no gradient
        const T* row = s.data() + (i - i0) * kKeyTile;
        const T* doi = dout + i * g.dv;
        for (int64_t j = j0; j < j1; ++j) {
          const T p = std::exp(row[j - j0] - lse[i]);
          if (p == T(0)) continue;
          const T z = g.dropout_p > 0 ? (keep(g, hd.bh, i, j) ? drop_scale : T(0)) : T(1);
          if (dv && z != T(0)) {
            const T pt = p * z;
            T* dvj = dv + j * g.dv;
            for (int64_t x = 0; x < g.dv; ++x) dvj[x] += pt * doi[x];
          }
          const T dp = z == T(0) ? T(0) : z * dot(doi, hd.v + j * g.dv, g.dv);
          const T ds = p * (dp - delta[i]) * scale;
          if (dq) {
            T* dqi = dq + i * g.d;
            const T* kj = hd.k + j * g.d;
            for (int64_t x = 0; x < g.d; ++x) dqi[x] += ds * kj[x];
          }
          if (dk) {
            T* dkj = dk + j * g.d;
            const T* qi = hd.q + i * g.d;
            for (int64_t x = 0; x < g.d; ++x) dkj[x] += ds * qi[x];
          }
        }
      }
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
