// CUDA batch norm (training mode) over x [N, C, S], same formulas as core/cpu/norm.cpp. Each kernel
// call is three launches: per-channel partial reductions, a per-channel finish, and one
// elementwise pass.
//  - Statistics: each channel's N*S values are cut into a fixed number of chunks; a block reduces
//    one chunk, every thread keeping a running Welford (count, mean, M2) of its elements (in the
//    compute precision, f32 for bf16: few values per thread), merged across the block by a fixed
//    tree and across chunks in chunk order, in double (Chan's pairwise formula). One pass over x,
//    no cancellation for large means, and deterministic: no atomics, the partition depends only on
//    the shape.
//  - Backward: the same chunked reduction of sum(dout) and sum(dout * (x - mean)).
// The finish computes the per-channel coefficients in double, as the CPU kernel does, so the
// elementwise passes are out = act(x * scale + shift) and dx = a * (dout - b - (x - mean) * k); the
// scale and shift come from the stored mean and invstd (core/norm_act.h), as the CPU's do.
// bf16 activations (autocast's; D = BFloat16) are loaded into f32 (T = opmath_t<D>), computed there
// with f32 statistics, parameters and gradients, and rounded once on the store; the normalized
// value is rounded to D before a residual is added and before the activation's mask is taken, as
// the unfused `bn(x) + r` and the CPU kernels round it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "core/cuda/cuda_util.h"
#include "core/cuda/device_util.cuh"
#include "core/cuda/kernels.h"
#include "core/cuda/launch.cuh"
#include "core/kernel_checks.h"

namespace octet::cuda {

using kernels::check_bn;
using kernels::check_bn_like_x;

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kChunkElems = 4096;  // values per block: 16 per thread
constexpr int64_t kMaxChunks = 65535;  // gridDim.y

// Chunks per channel for `len` values each; a function of the shape only.
int64_t chunks_for(int64_t len) {
  return std::min<int64_t>(kMaxChunks, std::max<int64_t>(1, (len + kChunkElems - 1) / kChunkElems));
}

struct Moments {
  double n, mean, m2;  // count, mean, sum of squared deviations from the mean
};

__device__ inline Moments merge(const Moments& a, const Moments& b) {
  if (b.n == 0) return a;
  if (a.n == 0) return b;
  const double n = a.n + b.n, d = b.mean - a.mean;
  return {n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n)};
}

// Channel ch's values are x[(i*C + ch)*S + j] for i < N, j < S; value e of the channel is (i, j) =
// (e / S, e % S). Block (ch, chunk) covers e in [chunk*chunk_len, (chunk+1)*chunk_len).
template <typename I>
__device__ inline I channel_offset(int64_t e, I c, I s, I ch) {
  const I ei = static_cast<I>(e);
  const I i = ei / s, j = ei - i * s;
  return (i * c + ch) * s + j;
}

__device__ inline int64_t chunk_end(int64_t begin, int64_t chunk_len, int64_t len) {
  return begin + chunk_len < len ? begin + chunk_len : len;
}

// The normalized value x * scale + shift rounded to D (an identity for f32 and f64): what the
// unfused batch norm writes, so what `bn(x) + r` adds r to and relu's backward masks with.
template <typename D, typename T>
__device__ inline T pre_activation(T x, T scale, T shift) {
  return convert<T>(convert<D>(x * scale + shift));
}

// ---------------------------------------------------------------- forward

// partial[(ch * chunks + chunk) * 3 + {0, 1, 2}] = the chunk's (count, mean, M2).
template <typename D, typename I>
__global__ void moments_kernel(const D* __restrict__ x, I c, I s, int64_t len, int64_t chunk_len,
                               double* __restrict__ partial) {
  using T = opmath_t<D>;
  __shared__ double sn[kThreads], smean[kThreads], sm2[kThreads];
  const I ch = static_cast<I>(blockIdx.x);
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk_len, end = chunk_end(begin, chunk_len, len);
  T mean = 0, m2 = 0;
  int count = 0;  // at most chunk_len / blockDim.x + 1 per thread
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const T v = load_opmath(x, channel_offset(e, c, s, ch));
    ++count;
    const T delta = v - mean;
    mean += delta / static_cast<T>(count);
    m2 += delta * (v - mean);
  }
  sn[threadIdx.x] = count, smean[threadIdx.x] = mean, sm2[threadIdx.x] = m2;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) {
      const int o = threadIdx.x + half;
      const Moments m = merge({sn[threadIdx.x], smean[threadIdx.x], sm2[threadIdx.x]}, {sn[o], smean[o], sm2[o]});
      sn[threadIdx.x] = m.n, smean[threadIdx.x] = m.mean, sm2[threadIdx.x] = m.m2;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double* dst = partial + (static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y) * 3;
    dst[0] = sn[0], dst[1] = smean[0], dst[2] = sm2[0];
  }
}

// Per channel: merges the chunks in order, writes mean and invstd, and coef = [scale (C), shift (C)].
template <typename T>
__global__ void finish_moments_kernel(const double* __restrict__ partial, int64_t c, int64_t chunks, double eps,
                                      const T* __restrict__ weight, const T* __restrict__ bias, T* __restrict__ mean,
                                      T* __restrict__ invstd, T* __restrict__ coef) {
  for (int64_t ch = first_index(); ch < c; ch += grid_stride()) {
    Moments m{0, 0, 0};
    for (int64_t j = 0; j < chunks; ++j) {
      const double* p = partial + (ch * chunks + j) * 3;
      m = merge(m, {p[0], p[1], p[2]});
    }
    const double mu = m.n > 0 ? m.mean : NAN;  // the CPU's 0/0 for an empty batch
    const double inv = 1.0 / sqrt(m.m2 / m.n + eps);
    mean[ch] = static_cast<T>(mu);
    invstd[ch] = static_cast<T>(inv);
    bn_affine(mean[ch], invstd[ch], weight, bias, ch, coef[ch], coef[c + ch]);
  }
}

template <typename D, typename I, typename T = opmath_t<D>>
__global__ void normalize_kernel(const D* __restrict__ x, const T* __restrict__ coef, const D* __restrict__ residual,
                                 D* __restrict__ out, I c, I s, int64_t total, NormActivation act) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I ch = (idx / s) % c;
    T y;
    if (residual != nullptr)  // the rounded normalized value, as bn(x) + r
      y = pre_activation<D>(load_opmath(x, idx), coef[ch], coef[c + ch]) + load_opmath(residual, idx);
    else
      y = load_opmath(x, idx) * coef[ch] + coef[c + ch];
    out[idx] = convert<D>(norm_act_apply(act, y));
  }
}

// The activation's backward from the recomputed pre-activation (the expression normalize_kernel
// rounds); out may be dout.
template <typename D, typename I, typename T = opmath_t<D>>
__global__ void act_grad_kernel(const D* dout, const D* __restrict__ x, const T* __restrict__ mean,
                                const T* __restrict__ invstd, const T* __restrict__ weight, const T* __restrict__ bias,
                                D* out, I c, I s, int64_t total, NormActivation act) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I ch = (idx / s) % c;
    T scale, shift;
    bn_affine(mean[ch], invstd[ch], weight, bias, ch, scale, shift);
    out[idx] =
        norm_act_passes(act, pre_activation<D>(load_opmath(x, idx), scale, shift)) ? dout[idx] : convert<D>(T(0));
  }
}

// ---------------------------------------------------------------- backward

// partial[(ch * chunks + chunk) * 2 + {0, 1}] = the chunk's sum(dout), sum(dout * (x - mean)).
template <typename D, typename I, typename T = opmath_t<D>>
__global__ void grad_sums_kernel(const D* __restrict__ dout, const D* __restrict__ x, const T* __restrict__ mean, I c,
                                 I s, int64_t len, int64_t chunk_len, double* __restrict__ partial) {
  __shared__ double sg[kThreads], sgx[kThreads];
  const I ch = static_cast<I>(blockIdx.x);
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk_len, end = chunk_end(begin, chunk_len, len);
  const T mu = mean[ch];
  T acc_g = 0, acc_gx = 0;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const I off = channel_offset(e, c, s, ch);
    const T g = load_opmath(dout, off);
    acc_g += g;
    acc_gx += g * (load_opmath(x, off) - mu);
  }
  sg[threadIdx.x] = acc_g, sgx[threadIdx.x] = acc_gx;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) {
      sg[threadIdx.x] += sg[threadIdx.x + half];
      sgx[threadIdx.x] += sgx[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double* dst = partial + (static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y) * 2;
    dst[0] = sg[0], dst[1] = sgx[0];
  }
}

// Per channel: dweight, dbias, and coef = [a, b, k, mean] (4 x C) for dx = a*(dout - b - (x - mean)*k).
template <typename T>
__global__ void finish_grad_kernel(const double* __restrict__ partial, int64_t c, int64_t chunks, double count,
                                   const T* __restrict__ weight, const T* __restrict__ mean,
                                   const T* __restrict__ invstd, T* __restrict__ dweight, T* __restrict__ dbias,
                                   T* __restrict__ coef) {
  for (int64_t ch = first_index(); ch < c; ch += grid_stride()) {
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < chunks; ++j) {
      sum_g += partial[(ch * chunks + j) * 2];
      sum_gx += partial[(ch * chunks + j) * 2 + 1];
    }
    const double inv = static_cast<double>(invstd[ch]);
    sum_gx *= inv;  // sum(dout * xhat)
    if (dweight != nullptr) dweight[ch] = static_cast<T>(sum_gx);
    if (dbias != nullptr) dbias[ch] = static_cast<T>(sum_g);
    if (coef == nullptr) continue;
    const double w = weight != nullptr ? static_cast<double>(weight[ch]) : 1.0;
    coef[ch] = static_cast<T>(w * inv);
    coef[c + ch] = static_cast<T>(sum_g / count);
    coef[2 * c + ch] = static_cast<T>(sum_gx / count * inv);  // times (x - mean): xhat * mean(dout * xhat)
    coef[3 * c + ch] = mean[ch];
  }
}

template <typename D, typename I, typename T = opmath_t<D>>
__global__ void grad_input_kernel(const D* __restrict__ dout, const D* __restrict__ x, const T* __restrict__ coef,
                                  D* __restrict__ dx, I c, I s, int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I ch = (idx / s) % c;
    dx[idx] = convert<D>(coef[ch] * (load_opmath(dout, idx) - coef[c + ch] -
                                     (load_opmath(x, idx) - coef[3 * c + ch]) * coef[2 * c + ch]));
  }
}

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <typename T>
T* mutable_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& residual) {
  check_bn("batch_norm", x, {weight, bias, mean, invstd});
  check_bn_like_x("batch_norm", x, {residual});
  OCTET_CHECK(mean.defined() && invstd.defined(), "batch_norm: mean and invstd outputs must be defined");
  OCTET_CHECK(out.is_contiguous() && out.shape() == x.shape() && out.dtype() == x.dtype(),
              "batch_norm: output must be a contiguous ", x.dtype(), " tensor of shape ", x.shape());
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  if (c == 0) return;
  const int64_t len = n * s, chunks = chunks_for(len), chunk_len = (len + chunks - 1) / chunks;
  const TensorOptions on_device = TensorOptions(opmath_dtype(x.dtype())).device(x.device());
  Tensor partial = empty({c * chunks * 3}, TensorOptions(DType::f64).device(x.device()));
  Tensor coef = empty({2 * c}, on_device);
  dispatch_activation_index("batch_norm", x.dtype(), x.numel() <= kInt32Max, [&](auto d, auto i) {
    using D = decltype(d);
    using T = opmath_t<D>;
    using I = decltype(i);
    const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(chunks));
    moments_kernel<D, I><<<grid, kThreads, 0, stream()>>>(x.data<D>(), static_cast<I>(c), static_cast<I>(s), len,
                                                          chunk_len, partial.data<double>());
    OCTET_CUDA_LAUNCH("batch_norm moments");
    finish_moments_kernel<T><<<grid_for(c), kThreads, 0, stream()>>>(partial.data<double>(), c, chunks, eps,
                                                                     data_or_null<T>(weight), data_or_null<T>(bias),
                                                                     mean.data<T>(), invstd.data<T>(), coef.data<T>());
    OCTET_CUDA_LAUNCH("batch_norm finish");
    const int64_t total = x.numel();
    if (total == 0) return;
    normalize_kernel<D, I>
        <<<grid_for(total), kThreads, 0, stream()>>>(x.data<D>(), coef.data<T>(), data_or_null<D>(residual),
                                                     out.data<D>(), static_cast<I>(c), static_cast<I>(s), total, act);
    OCTET_CUDA_LAUNCH("batch_norm normalize");
  });
}

void batch_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  check_bn("batch_norm_backward", x, {weight, mean, invstd, dweight, dbias});
  OCTET_CHECK(dout.shape() == x.shape() && dout.is_contiguous() && dout.dtype() == x.dtype() &&
                  (!dx.defined() || (dx.is_contiguous() && dx.shape() == x.shape() && dx.dtype() == x.dtype())),
              "batch_norm_backward: dout and dx must be contiguous ", x.dtype(), " ", x.shape());
  OCTET_CHECK(mean.defined() && invstd.defined(), "batch_norm_backward: mean and invstd must be defined");
  if (!dx.defined() && !dweight.defined() && !dbias.defined()) return;
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  if (c == 0) return;
  const int64_t len = n * s, chunks = chunks_for(len), chunk_len = (len + chunks - 1) / chunks;
  Tensor partial = empty({c * chunks * 2}, TensorOptions(DType::f64).device(x.device()));
  Tensor coef = dx.defined() ? empty({4 * c}, TensorOptions(opmath_dtype(x.dtype())).device(x.device())) : Tensor();
  dispatch_activation_index("batch_norm_backward", x.dtype(), x.numel() <= kInt32Max, [&](auto d, auto i) {
    using D = decltype(d);
    using T = opmath_t<D>;
    using I = decltype(i);
    const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(chunks));
    grad_sums_kernel<D, I><<<grid, kThreads, 0, stream()>>>(dout.data<D>(), x.data<D>(), mean.data<T>(),
                                                            static_cast<I>(c), static_cast<I>(s), len, chunk_len,
                                                            partial.data<double>());
    OCTET_CUDA_LAUNCH("batch_norm_backward sums");
    finish_grad_kernel<T><<<grid_for(c), kThreads, 0, stream()>>>(
        partial.data<double>(), c, chunks, static_cast<double>(len), data_or_null<T>(weight), mean.data<T>(),
        invstd.data<T>(), mutable_or_null<T>(dweight), mutable_or_null<T>(dbias), mutable_or_null<T>(coef));
    OCTET_CUDA_LAUNCH("batch_norm_backward finish");
    const int64_t total = x.numel();
    if (!dx.defined() || total == 0) return;
    grad_input_kernel<D, I><<<grid_for(total), kThreads, 0, stream()>>>(
        dout.data<D>(), x.data<D>(), coef.data<T>(), dx.data<D>(), static_cast<I>(c), static_cast<I>(s), total);
    OCTET_CUDA_LAUNCH("batch_norm_backward dx");
  });
}

void batch_norm_act_grad(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& out) {
  check_bn("batch_norm_act_grad", x, {weight, bias, mean, invstd});
  OCTET_CHECK(dout.shape() == x.shape() && out.shape() == x.shape() && dout.dtype() == x.dtype() &&
                  out.dtype() == x.dtype() && dout.is_contiguous() && out.is_contiguous(),
              "batch_norm_act_grad: dout and out must be contiguous ", x.dtype(), " ", x.shape());
  OCTET_CHECK(mean.defined() && invstd.defined(), "batch_norm_act_grad: mean and invstd must be defined");
  const int64_t c = x.size(1), s = x.size(2), total = x.numel();
  if (total == 0) return;
  dispatch_activation_index("batch_norm_act_grad", x.dtype(), total <= kInt32Max, [&](auto d, auto i) {
    using D = decltype(d);
    using T = opmath_t<D>;
    using I = decltype(i);
    act_grad_kernel<D, I><<<grid_for(total), kThreads, 0, stream()>>>(
        dout.data<D>(), x.data<D>(), mean.data<T>(), invstd.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias),
        out.data<D>(), static_cast<I>(c), static_cast<I>(s), total, act);
    OCTET_CUDA_LAUNCH("batch_norm_act_grad");
  });
}

}  // namespace octet::cuda
