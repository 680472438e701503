// Scaled dot-product attention on CUDA (core/kernels.h attention_forward/backward): the CPU
// kernel's algorithm (core/cpu/attention.cpp) with one thread block per row, never a [Tq, Tk]
// matrix in memory:
//   - forward, one block per query row: the row's max and sum of exp over the keys (block
//     reductions), then the output from chunks of kRowThreads probabilities staged in shared memory;
//   - backward: D_i = dO_i . O_i and dQ_i, one block per query row; then dK_j and dV_j, one block
//     per key row, the probabilities recomputed from the saved log-sum-exp. No atomics: the sums
//     run in a fixed order, so the gradients are deterministic.
// Dropout draws the CPU's bits (core/generator.h philox_at), so both devices drop the same
// elements.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/cuda/cuda_util.h"
#include "core/cuda/kernels.h"
#include "core/generator.h"

namespace octet::cuda {
namespace {

constexpr int kRowThreads = 128;
constexpr int kMaxPerThread = 8;  // output elements per thread: head dims up to kRowThreads * 8 = 1024

__device__ inline bool masked(const AttentionGeometry& g, const uint8_t* pad, int64_t i, int64_t j) {
  return (g.causal && j > i) || (pad != nullptr && pad[j] != 0);
}

__device__ inline double keep_scale(const AttentionGeometry& g, int64_t bh, int64_t i, int64_t j) {
  if (g.dropout_p <= 0) return 1.0;
  const bool kept = dropout_keeps(g.seed, g.offset, static_cast<uint64_t>((bh * g.tq + i) * g.tk + j), g.dropout_p);
  return kept ? 1.0 / (1.0 - g.dropout_p) : 0.0;
}

template <typename T>
__device__ T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t x = 0; x < n; ++x) s += a[x] * b[x];
  return s;
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

// acc[e] += sum over t < n of w[t] * rows[(c0 + t) * width + x], for this thread's columns
// x = threadIdx.x + e * kRowThreads below width: a chunk of weights staged in shared memory times
// the matching rows of a [*, width] matrix.
template <typename T>
__device__ void accumulate_rows(T (&acc)[kMaxPerThread], const T* w, const T* rows, int64_t c0, int64_t n,
                                int64_t width) {
#pragma unroll
  for (int e = 0; e < kMaxPerThread; ++e) {
    const int64_t x = threadIdx.x + e * kRowThreads;
    if (x < width)
      for (int64_t t = 0; t < n; ++t) acc[e] += w[t] * rows[(c0 + t) * width + x];
  }
}

template <typename T>
__device__ T score(const AttentionGeometry& g, const T* qi, const T* k, const uint8_t* pad, int64_t i, int64_t j) {
  if (masked(g, pad, i, j)) return -INFINITY;
  return static_cast<T>(g.scale) * dot(qi, k + j * g.d, g.d);
}

// Block (bh, i) = (blockIdx.y, blockIdx.x).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    forward_kernel(AttentionGeometry g, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                   const uint8_t* __restrict__ pad_all, T* __restrict__ out, T* __restrict__ lse) {
  __shared__ T red[kRowThreads];
  __shared__ T p[kRowThreads];
  const int64_t i = blockIdx.x, bh = blockIdx.y, b = bh / g.h;
  const T* qi = q + (bh * g.tq + i) * g.d;
  const T* kh = k + bh * g.tk * g.d;
  const T* vh = v + bh * g.tk * g.dv;
  const uint8_t* pad = pad_all ? pad_all + b * g.tk : nullptr;
  T mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < g.tk; j += kRowThreads) mx = fmax(mx, score(g, qi, kh, pad, i, j));
  mx = block_reduce<T, true>(mx, red);
  T* o = out + (bh * g.tq + i) * g.dv;
  if (mx == -INFINITY) {  // every key masked: 0, as PyTorch's safe softmax
    for (int64_t x = threadIdx.x; x < g.dv; x += kRowThreads) o[x] = 0;
    if (threadIdx.x == 0) lse[bh * g.tq + i] = -INFINITY;
    return;
  }
  T sum = 0;
  for (int64_t j = threadIdx.x; j < g.tk; j += kRowThreads) sum += exp(score(g, qi, kh, pad, i, j) - mx);
  sum = block_reduce<T, false>(sum, red);
  T acc[kMaxPerThread] = {};
  for (int64_t c0 = 0; c0 < g.tk; c0 += kRowThreads) {
    const int64_t j = c0 + threadIdx.x;
    p[threadIdx.x] =
        j < g.tk ? exp(score(g, qi, kh, pad, i, j) - mx) / sum * static_cast<T>(keep_scale(g, bh, i, j)) : T(0);
    __syncthreads();
    const int64_t n = g.tk - c0 < kRowThreads ? g.tk - c0 : kRowThreads;
    accumulate_rows(acc, p, vh, c0, n, g.dv);
    __syncthreads();
  }
#pragma unroll
  for (int e = 0; e < kMaxPerThread; ++e) {
    const int64_t x = threadIdx.x + e * kRowThreads;
    if (x < g.dv) o[x] = acc[e];
  }
  if (threadIdx.x == 0) lse[bh * g.tq + i] = mx + log(sum);
}

// dS_ij = P_ij (dP_ij - D_i) * scale for query i and key j (0 where masked or the row is).
template <typename T>
__device__ T dscore(const AttentionGeometry& g, const T* qi, const T* kh, const T* vh, const uint8_t* pad, const T* doi,
                    T lse_i, T delta_i, int64_t bh, int64_t i, int64_t j, T* ptilde) {
  *ptilde = 0;
  if (lse_i == -INFINITY || masked(g, pad, i, j)) return 0;
  const T pij = exp(score(g, qi, kh, pad, i, j) - lse_i);
  const T z = static_cast<T>(keep_scale(g, bh, i, j));
  *ptilde = pij * z;
  const T dp = z == T(0) ? T(0) : z * dot(doi, vh + j * g.dv, g.dv);
  return pij * (dp - delta_i) * static_cast<T>(g.scale);
}

// Block (bh, i): delta[bh, i] and, if dq, dq_i.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    backward_query_kernel(AttentionGeometry g, const T* __restrict__ q, const T* __restrict__ k,
                          const T* __restrict__ v, const uint8_t* __restrict__ pad_all, const T* __restrict__ out,
                          const T* __restrict__ dout, const T* __restrict__ lse, T* __restrict__ delta,
                          T* __restrict__ dq) {
  __shared__ T red[kRowThreads];
  __shared__ T ds[kRowThreads];
  const int64_t i = blockIdx.x, bh = blockIdx.y, b = bh / g.h, row = bh * g.tq + i;
  const T* doi = dout + row * g.dv;
  const T* oi = out + row * g.dv;
  T part = 0;
  for (int64_t x = threadIdx.x; x < g.dv; x += kRowThreads) part += doi[x] * oi[x];
  const T delta_i = block_reduce<T, false>(part, red);
  if (threadIdx.x == 0) delta[row] = delta_i;
  if (dq == nullptr) return;
  const T* qi = q + row * g.d;
  const T* kh = k + bh * g.tk * g.d;
  const T* vh = v + bh * g.tk * g.dv;
  const uint8_t* pad = pad_all ? pad_all + b * g.tk : nullptr;
  T acc[kMaxPerThread] = {};
  for (int64_t c0 = 0; c0 < g.tk; c0 += kRowThreads) {
    const int64_t j = c0 + threadIdx.x;
    T unused;
    ds[threadIdx.x] = j < g.tk ? dscore(g, qi, kh, vh, pad, doi, lse[row], delta_i, bh, i, j, &unused) : T(0);
    __syncthreads();
    const int64_t n = g.tk - c0 < kRowThreads ? g.tk - c0 : kRowThreads;
    accumulate_rows(acc, ds, kh, c0, n, g.d);
    __syncthreads();
  }
#pragma unroll
  for (int e = 0; e < kMaxPerThread; ++e) {
    const int64_t x = threadIdx.x + e * kRowThreads;
    if (x < g.d) dq[row * g.d + x] = acc[e];
  }
}

// Block (bh, j): dk_j and dv_j (either may be null).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    backward_key_kernel(AttentionGeometry g, const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                        const uint8_t* __restrict__ pad_all, const T* __restrict__ dout, const T* __restrict__ lse,
                        const T* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv) {
  __shared__ T ds[kRowThreads];
  __shared__ T pt[kRowThreads];
  const int64_t j = blockIdx.x, bh = blockIdx.y, b = bh / g.h;
  const T* qh = q + bh * g.tq * g.d;
  const T* kh = k + bh * g.tk * g.d;
  const T* vh = v + bh * g.tk * g.dv;
  const T* doh = dout + bh * g.tq * g.dv;
  const uint8_t* pad = pad_all ? pad_all + b * g.tk : nullptr;
  T acc_k[kMaxPerThread] = {}, acc_v[kMaxPerThread] = {};
  for (int64_t c0 = 0; c0 < g.tq; c0 += kRowThreads) {
    const int64_t i = c0 + threadIdx.x;
    T ptilde = 0;
    ds[threadIdx.x] = i < g.tq ? dscore(g, qh + i * g.d, kh, vh, pad, doh + i * g.dv, lse[bh * g.tq + i],
                                        delta[bh * g.tq + i], bh, i, j, &ptilde)
                               : T(0);
    pt[threadIdx.x] = ptilde;
    __syncthreads();
    const int64_t n = g.tq - c0 < kRowThreads ? g.tq - c0 : kRowThreads;
    if (dk != nullptr) accumulate_rows(acc_k, ds, qh, c0, n, g.d);
    if (dv != nullptr) accumulate_rows(acc_v, pt, doh, c0, n, g.dv);
    __syncthreads();
  }
#pragma unroll
  for (int e = 0; e < kMaxPerThread; ++e) {
    const int64_t x = threadIdx.x + e * kRowThreads;
    if (dk != nullptr && x < g.d) dk[(bh * g.tk + j) * g.d + x] = acc_k[e];
    if (dv != nullptr && x < g.dv) dv[(bh * g.tk + j) * g.dv + x] = acc_v[e];
  }
}

void check_geometry(const char* op, const AttentionGeometry& g) {
  OCTET_CHECK(g.d <= kRowThreads * kMaxPerThread && g.dv <= kRowThreads * kMaxPerThread, op, ": head dims up to ",
              kRowThreads * kMaxPerThread, " on CUDA, got ", g.d, " and ", g.dv);
  OCTET_CHECK(g.tq <= 0x7fffffff && g.tk <= 0x7fffffff && g.b * g.h <= 65535, op,
              ": at most 65535 batch x heads and 2^31 - 1 positions on CUDA");
}

template <typename T>
const T* ptr(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <typename T>
T* mut(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
const uint8_t* pad_ptr(const Tensor& t) { return t.defined() ? t.data<uint8_t>() : nullptr; }

}  // namespace

void attention_forward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& key_padding_mask, const Tensor& out, const Tensor& lse) {
  check_geometry("attention_forward", g);
  if (g.b * g.h == 0 || g.tq == 0) return;
  const dim3 grid(static_cast<unsigned>(g.tq), static_cast<unsigned>(g.b * g.h));
  auto run = [&](auto t) {
    using T = decltype(t);
    forward_kernel<T><<<grid, kRowThreads, 0, stream()>>>(g, ptr<T>(q), ptr<T>(k), ptr<T>(v), pad_ptr(key_padding_mask),
                                                          mut<T>(out), mut<T>(lse));
  };
  q.dtype() == DType::f64 ? run(double{}) : run(float{});
  OCTET_CUDA_LAUNCH("attention_forward");
}

void attention_backward(const AttentionGeometry& g, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& key_padding_mask, const Tensor& out, const Tensor& dout, const Tensor& lse,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  check_geometry("attention_backward", g);
  if (g.b * g.h == 0) return;
  if (g.tq == 0) {  // no query: no gradient reaches the keys
    if (dk.defined()) fill(dk, 0.0);
    if (dv.defined()) fill(dv, 0.0);
    return;
  }
  Tensor delta = empty({g.b * g.h * g.tq}, TensorOptions(q.dtype()).device(q.device()));
  auto run = [&](auto t) {
    using T = decltype(t);
    backward_query_kernel<T>
        <<<dim3(static_cast<unsigned>(g.tq), static_cast<unsigned>(g.b * g.h)), kRowThreads, 0, stream()>>>(
            g, ptr<T>(q), ptr<T>(k), ptr<T>(v), pad_ptr(key_padding_mask), ptr<T>(out), ptr<T>(dout), ptr<T>(lse),
            mut<T>(delta), mut<T>(dq));
    OCTET_CUDA_LAUNCH("attention_backward queries");
    if (!dk.defined() && !dv.defined()) return;
    if (g.tk == 0) return;
    backward_key_kernel<T>
        <<<dim3(static_cast<unsigned>(g.tk), static_cast<unsigned>(g.b * g.h)), kRowThreads, 0, stream()>>>(
            g, ptr<T>(q), ptr<T>(k), ptr<T>(v), pad_ptr(key_padding_mask), ptr<T>(dout), ptr<T>(lse), ptr<T>(delta),
            mut<T>(dk), mut<T>(dv));
    OCTET_CUDA_LAUNCH("attention_backward keys");
  };
  q.dtype() == DType::f64 ? run(double{}) : run(float{});
}

}  // namespace octet::cuda
