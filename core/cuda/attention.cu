// Scaled dot-product attention on CUDA (core/kernels.h attention_forward/backward): the CPU
// kernel's algorithm (core/cpu/attention.cpp) tiled by blocks of query rows, each block's products
// as cuBLAS strided-batched GEMMs over all (batch, head) pairs at once:
//   - forward, per block of query rows [i0, i1): S = scale Q K^T against the keys that block can
//     see (all, or j < i1 when causal), the row softmax in one kernel (max, sum, lse = max + log
//     sum, then P~ = exp(S - lse) with dropout applied, in place), O = P~ V;
//   - bf16 attention (bf16 q, k, v, out and dout; or g.round_bf16 on f32 operands holding bf16
//     values): every product takes bf16 operands on tensor cores and sums in f32 (S, dP~ and the
//     gradients f32), P~ and dS rounded to bf16 before their products, as the CPU's bf16 kernel
//     (core/cpu/attention.cpp) rounds them, the output rounded once; the forward's P~ here is
//     normalized before its rounding, the CPU's online softmax rounds exp(S - running max): the
//     outputs agree to a bf16 unit;
//   - backward: D_i = dO_i . O_i, then per block S again, dP~ = dO V^T, one elementwise kernel that
//     recomputes P from the saved lse and forms dS = P (dP - D) scale, then dV += P~^T dO,
//     dK += dS^T Q and dQ = dS K.
// Only one block's [rows, Tk] scores exist at a time (kBlockBytes bounds them), and the backward
// keeps the log-sum-exp (O(T) per head), never a [Tq, Tk] matrix per head. No atomics: the GEMMs
// and the fixed block order make the gradients deterministic. Dropout draws the CPU's bits
// (core/generator.h philox_at), so both devices drop the same elements.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/cuda/cuda_util.h"
#include "core/cuda/device_util.cuh"
#include "core/cuda/gemm.h"
#include "core/cuda/kernels.h"
#include "core/generator.h"

namespace octet::cuda {
namespace {

constexpr int kRowThreads = 128;
// Query rows per block at most (and fewer when a block's scores would pass kBlockBytes): small
// enough that the causal triangle wastes little on keys a block cannot see.
constexpr int64_t kMaxBlockRows = 256;
constexpr int64_t kBlockBytes = int64_t{64} << 20;

__device__ inline bool masked(const AttentionGeometry& g, const uint8_t* pad, int64_t i, int64_t j) {
  return (g.causal && j > i) || (pad != nullptr && pad[j] != 0);
}

__device__ inline double keep_scale(const AttentionGeometry& g, int64_t bh, int64_t i, int64_t j) {
  if (g.dropout_p <= 0) return 1.0;
  const bool kept = dropout_keeps(g.seed, g.offset, static_cast<uint64_t>((bh * g.tq + i) * g.tk + j), g.dropout_p);
  return kept ? 1.0 / (1.0 - g.dropout_p) : 0.0;
}

// x, or (bf16 attention on f32 operands, g.round_bf16) x rounded to bf16: what the products take.
template <typename T>
__device__ inline T product_operand(const AttentionGeometry& g, T x) {
  if constexpr (sizeof(T) == 4) return g.round_bf16 ? bf16_to_float(float_to_bf16(x)) : x;
  return x;
}

// Block-wide max or sum of v (every thread gets it); `red` is kRowThreads of shared scratch.
template <typename T, bool kMax>
__device__ T block_reduce(T v, T* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) {
      const T o = red[threadIdx.x + half];
      red[threadIdx.x] = kMax ? (o > red[threadIdx.x] ? o : red[threadIdx.x]) : red[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const T out = red[0];
  __syncthreads();
  return out;
}

// One block of query rows [i0, i0 + rows) against keys [0, nk), for every (batch, head) pair:
// the scores buffer is [B*H, rows, nk].
struct QueryBlock {
  int64_t i0, rows, nk;
};

// Block x = bh * rows + r: row i = i0 + r of the scaled scores s, to its probabilities with
// dropout applied (P~) in p (of the operands' type D: s itself where D is T), and its lse. A row
// with every key masked gets 0 and lse -inf.
template <typename T, typename D>
__global__ void __launch_bounds__(kRowThreads)
    softmax_rows_kernel(AttentionGeometry g, QueryBlock blk, const uint8_t* __restrict__ pad_all, T* s, D* p,
                        T* __restrict__ lse) {
  __shared__ T red[kRowThreads];
  const int64_t r = blockIdx.x % blk.rows, bh = blockIdx.x / blk.rows, i = blk.i0 + r;
  const uint8_t* pad = pad_all ? pad_all + (bh / g.h) * g.tk : nullptr;
  const T* row = s + (bh * blk.rows + r) * blk.nk;
  D* prow = p + (bh * blk.rows + r) * blk.nk;  // each thread reads row[j] before it writes prow[j]
  T mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < blk.nk; j += kRowThreads)
    if (!masked(g, pad, i, j)) mx = fmax(mx, row[j]);
  mx = block_reduce<T, true>(mx, red);
  if (mx == -INFINITY) {  // every key masked: 0, as PyTorch's safe softmax
    for (int64_t j = threadIdx.x; j < blk.nk; j += kRowThreads) prow[j] = convert<D>(T(0));
    if (threadIdx.x == 0) lse[bh * g.tq + i] = -INFINITY;
    return;
  }
  T sum = 0;
  for (int64_t j = threadIdx.x; j < blk.nk; j += kRowThreads)
    if (!masked(g, pad, i, j)) sum += exp(row[j] - mx);
  sum = block_reduce<T, false>(sum, red);
  const T l = mx + log(sum);
  for (int64_t j = threadIdx.x; j < blk.nk; j += kRowThreads)
    prow[j] = convert<D>(
        masked(g, pad, i, j) ? T(0) : product_operand(g, exp(row[j] - l) * static_cast<T>(keep_scale(g, bh, i, j))));
  if (threadIdx.x == 0) lse[bh * g.tq + i] = l;
}

// Block x = row of [B*H*Tq]: delta = dO . O (of the operands' type D, summed in T).
template <typename T, typename D>
__global__ void __launch_bounds__(kRowThreads)
    delta_kernel(int64_t dv, const D* __restrict__ out, const D* __restrict__ dout, T* __restrict__ delta) {
  __shared__ T red[kRowThreads];
  const int64_t row = blockIdx.x;
  T part = 0;
  for (int64_t x = threadIdx.x; x < dv; x += kRowThreads)
    part += load_opmath(dout, row * dv + x) * load_opmath(out, row * dv + x);
  part = block_reduce<T, false>(part, red);
  if (threadIdx.x == 0) delta[row] = part;
}

// Elementwise over a block's [B*H, rows, nk]: from s, the scaled scores, P~ into p (the
// probabilities recomputed from lse, dropout applied); from dp, dP~ = dO V^T, dS = P (z dP~ - D)
// scale into ds, z the dropout's keep scale; 0 where masked or the whole row is. p and ds are of
// the operands' type D (s and dp themselves where D is T: each element is read before it is
// written).
template <typename T, typename D>
__global__ void backward_scores_kernel(AttentionGeometry g, QueryBlock blk, const uint8_t* __restrict__ pad_all,
                                       const T* __restrict__ lse, const T* __restrict__ delta, const T* s, const T* dp,
                                       D* p, D* ds, int64_t count) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e % blk.nk, r = (e / blk.nk) % blk.rows, bh = e / (blk.nk * blk.rows), i = blk.i0 + r;
    const int64_t row = bh * g.tq + i;
    const uint8_t* pad = pad_all ? pad_all + (bh / g.h) * g.tk : nullptr;
    const T l = lse[row];
    if (l == -INFINITY || masked(g, pad, i, j)) {
      p[e] = convert<D>(T(0));
      ds[e] = convert<D>(T(0));
      continue;
    }
    const T prob = exp(s[e] - l), grad = dp[e];
    const T z = static_cast<T>(keep_scale(g, bh, i, j));
    p[e] = convert<D>(product_operand(g, prob * z));
    ds[e] = convert<D>(product_operand(g, prob * (z * grad - delta[row]) * static_cast<T>(g.scale)));
  }
}

void check_geometry(const char* op, const AttentionGeometry& g) {
  OCTET_CHECK(g.b * g.h * g.tq <= 0x7fffffff, op, ": at most 2^31 - 1 query rows (batch x heads x Tq) on CUDA, got ",
              g.b * g.h * g.tq);
}

// The query rows per block: as many as keep a block's scores within kBlockBytes, 1 to kMaxBlockRows.
int64_t block_rows(const AttentionGeometry& g, size_t elem) {
  const int64_t per_row = std::max<int64_t>(1, g.b * g.h * g.tk * static_cast<int64_t>(elem));
  return std::clamp<int64_t>(kBlockBytes / per_row, 1, std::min<int64_t>(kMaxBlockRows, g.tq));
}

// The keys query rows [i0, i1) can see: all, or j < i1 when causal (top-left aligned).
QueryBlock query_block(const AttentionGeometry& g, int64_t i0, int64_t rows) {
  return {i0, rows, g.causal ? std::min(g.tk, i0 + rows) : g.tk};
}

template <typename T>
const T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
const uint8_t* pad_ptr(const Tensor& t) { return t.defined() ? t.data<uint8_t>() : nullptr; }

// S = scale Q[i0:i1] K[:nk]^T into s ([B*H, rows, nk]; q and k of type D, s of its sum type T).
template <typename D, typename T>
void block_scores(const AttentionGeometry& g, const QueryBlock& blk, const Tensor& q, const Tensor& k, T* s) {
  gemm_batched(q.dtype(), q.device(), false, true, blk.rows, blk.nk, g.d, g.scale,
               {ptr<D>(q) + blk.i0 * g.d, g.d, g.tq * g.d}, {ptr<D>(k), g.d, g.tk * g.d}, 0.0,
               {s, blk.nk, blk.rows * blk.nk}, g.b * g.h);
}

// A block's P~ (or dS) in the operands' type D: the f32/f64 scores buffer itself, or (bf16) a
// buffer of its own that the tensor-core products read.
template <typename D, typename T>
Tensor operand_buffer(const Tensor& scores) {
  if constexpr (std::is_same_v<D, T>) return scores;
  return empty(scores.shape(), TensorOptions(DType::bf16).device(scores.device()));
}

// The dtypes attention takes on CUDA: q, k, v (and out, dout) of one float dtype, or bf16 with an
// f32 lse and f32 gradients (and an out of bf16 or f32), as the CPU's kernel.
void check_dtypes(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                  std::initializer_list<Tensor> like_q, std::initializer_list<Tensor> grads) {
  const DType t = q.dtype(), acc = opmath_dtype(t);
  OCTET_CHECK(t == DType::f32 || t == DType::f64 || t == DType::bf16, op, ": expected dtype f32, f64 or bf16, got ", t);
  OCTET_CHECK(k.dtype() == t && v.dtype() == t && lse.dtype() == acc, op, ": expected ", t, " q, k, v and an ", acc,
              " lse, got ", q.dtype(), ", ", k.dtype(), ", ", v.dtype(), ", ", lse.dtype());
  for (const Tensor& x : like_q)
    OCTET_CHECK(x.dtype() == t, op, ": expected ", t, " out and dout (as q), got ", x.dtype());
  for (const Tensor& x : grads)
    OCTET_CHECK(!x.defined() || x.dtype() == acc, op, ": expected ", acc, " gradients for ", t, " q, got ", x.dtype());
}

}  // namespace

void attention_forward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_padding_mask, const Tensor& out, const Tensor& lse) {
  check_geometry("attention_forward", g);
  check_dtypes("attention_forward", q, k, v, lse, {}, {});
  OCTET_CHECK(out.dtype() == q.dtype() || (q.dtype() == DType::bf16 && out.dtype() == DType::f32),
              "attention_forward: expected a ", q.dtype(), " out", q.dtype() == DType::bf16 ? " (or f32)" : "",
              ", got ", out.dtype());
  if (g.b * g.h == 0 || g.tq == 0) return;
  if (g.tk == 0) {  // no key: every row fully masked
    fill(out, 0.0);
    fill(lse, -INFINITY);
    return;
  }
  auto run = [&](auto d) {
    using D = decltype(d);
    using T = opmath_t<D>;
    const int64_t rows = block_rows(g, sizeof(T) + (std::is_same_v<D, T> ? 0 : sizeof(D)));
    Tensor scores = empty({g.b * g.h * rows * g.tk}, TensorOptions(opmath_dtype(q.dtype())).device(q.device()));
    Tensor probs = operand_buffer<D, T>(scores);
    T* s = scores.data<T>();
    D* p = probs.data<D>();
    // out (of D, or f32 for bf16 operands): rounded once from the f32 sums where it is bf16
    const bool bf16_out = out.dtype() == DType::bf16;
    auto* out_base = static_cast<char*>(out.raw_data());
    const int64_t out_elem = static_cast<int64_t>(dtype_size(out.dtype()));
    for (int64_t i0 = 0; i0 < g.tq; i0 += rows) {
      const QueryBlock blk = query_block(g, i0, std::min(rows, g.tq - i0));
      block_scores<D>(g, blk, q, k, s);
      softmax_rows_kernel<T, D><<<static_cast<unsigned>(g.b * g.h * blk.rows), kRowThreads, 0, stream()>>>(
          g, blk, pad_ptr(key_padding_mask), s, p, lse.data<T>());
      OCTET_CUDA_LAUNCH("attention_forward softmax");
      // O[i0:i1] = P~ V[:nk]
      gemm_batched(q.dtype(), q.device(), false, false, blk.rows, g.dv, blk.nk, 1.0, {p, blk.nk, blk.rows * blk.nk},
                   {ptr<D>(v), g.dv, g.tk * g.dv}, 0.0, {out_base + blk.i0 * g.dv * out_elem, g.dv, g.tq * g.dv},
                   g.b * g.h, bf16_out);
    }
  };
  if (q.dtype() == DType::bf16) return run(BFloat16{});
  q.dtype() == DType::f64 ? run(double{}) : run(float{});
}

void attention_backward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  check_geometry("attention_backward", g);
  check_dtypes("attention_backward", q, k, v, lse, {out, dout}, {dq, dk, dv});
  if (dk.defined()) fill(dk, 0.0);  // the blocks add into them
  if (dv.defined()) fill(dv, 0.0);
  if (g.b * g.h == 0 || g.tq == 0) return;  // no query: no gradient reaches the keys
  if (g.tk == 0) {                          // no key: the output is 0 whatever q is
    if (dq.defined()) fill(dq, 0.0);
    return;
  }
  const TensorOptions to = TensorOptions(opmath_dtype(q.dtype())).device(q.device());
  auto run = [&](auto d) {
    using D = decltype(d);
    using T = opmath_t<D>;
    Tensor delta = empty({g.b * g.h * g.tq}, to);
    delta_kernel<T, D><<<static_cast<unsigned>(g.b * g.h * g.tq), kRowThreads, 0, stream()>>>(
        g.dv, out.data<D>(), dout.data<D>(), delta.data<T>());
    OCTET_CUDA_LAUNCH("attention_backward delta");
    const int64_t rows = block_rows(g, 2 * (sizeof(T) + (std::is_same_v<D, T> ? 0 : sizeof(D))));
    Tensor scores = empty({g.b * g.h * rows * g.tk}, to), dscores = empty({g.b * g.h * rows * g.tk}, to);
    Tensor probs = operand_buffer<D, T>(scores), dprobs = operand_buffer<D, T>(dscores);
    T *s = scores.data<T>(), *ds = dscores.data<T>();
    D *p = probs.data<D>(), *dsd = dprobs.data<D>();
    const int64_t bh = g.b * g.h;
    for (int64_t i0 = 0; i0 < g.tq; i0 += rows) {
      const QueryBlock blk = query_block(g, i0, std::min(rows, g.tq - i0));
      // P~ and dS as the products take them (D), dP~ as the product writes it (T)
      const BatchOperand sb{p, blk.nk, blk.rows * blk.nk}, dsb{dsd, blk.nk, blk.rows * blk.nk};
      const BatchOperand qb{ptr<D>(q) + i0 * g.d, g.d, g.tq * g.d}, kb{ptr<D>(k), g.d, g.tk * g.d};
      const BatchOperand dob{ptr<D>(dout) + i0 * g.dv, g.dv, g.tq * g.dv};
      block_scores<D>(g, blk, q, k, s);
      // dP~ = dO[i0:i1] V[:nk]^T
      gemm_batched(q.dtype(), q.device(), false, true, blk.rows, blk.nk, g.dv, 1.0, dob, {ptr<D>(v), g.dv, g.tk * g.dv},
                   0.0, {ds, blk.nk, blk.rows * blk.nk}, bh);
      const int64_t count = bh * blk.rows * blk.nk;
      backward_scores_kernel<T, D><<<grid_for(count), kThreads, 0, stream()>>>(
          g, blk, pad_ptr(key_padding_mask), ptr<T>(lse), delta.data<T>(), s, ds, p, dsd, count);
      OCTET_CUDA_LAUNCH("attention_backward scores");
      if (dv.defined())  // dV[:nk] += P~^T dO[i0:i1]
        gemm_batched(q.dtype(), q.device(), true, false, blk.nk, g.dv, blk.rows, 1.0, sb, dob, 1.0,
                     {dv.data<T>(), g.dv, g.tk * g.dv}, bh);
      if (dk.defined())  // dK[:nk] += dS^T Q[i0:i1]
        gemm_batched(q.dtype(), q.device(), true, false, blk.nk, g.d, blk.rows, 1.0, dsb, qb, 1.0,
                     {dk.data<T>(), g.d, g.tk * g.d}, bh);
      if (dq.defined())  // dQ[i0:i1] = dS K[:nk]
        gemm_batched(q.dtype(), q.device(), false, false, blk.rows, g.d, blk.nk, 1.0, dsb, kb, 0.0,
                     {dq.data<T>() + i0 * g.d, g.d, g.tq * g.d}, bh);
    }
  };
  if (q.dtype() == DType::bf16) return run(BFloat16{});
  q.dtype() == DType::f64 ? run(double{}) : run(float{});
}

}  // namespace octet::cuda
