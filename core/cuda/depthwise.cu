// Direct 2-D convolution on the GPU, fast for depthwise convolution (MobileNetV2's 3x3 layers) and
// correct for any grouping (see depthwise.h). Output channel k belongs to group k / kg and reads
// that group's cg input channels; for depthwise cg = 1 and k reads input channel k / (K / C).
//  - forward: one thread per output element sums its cg*R*S taps in order (bias first);
//  - backward data: one thread per dx element gathers from every (k, r, s) whose window covers it,
//    in the order k, r, s (the CPU kernel's order), so no atomics are needed;
//  - backward weight: one block per weight element (tap) reduces over the N*P*Q outputs with a
//    fixed shared-memory tree; large reductions split into a fixed number of chunks per tap whose
//    partial sums a second kernel adds in order. Deterministic.
// Indices are 32-bit when every tensor has fewer than 2^31 elements (integer division is most of
// the cost here), 64-bit otherwise.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/cuda/cuda_util.h"
#include "core/cuda/depthwise.h"
#include "core/cuda/device_util.cuh"
#include "core/cuda/launch.cuh"

namespace octet::cuda {

namespace {

using kernels::Conv2dGeometry;

// The geometry in the kernels' index type I.
template <typename I>
struct Geom {
  I n, c, h, w, k, r, s, p, q;
  I stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  I cg, kg;  // input and output channels per group
};

template <typename I>
Geom<I> geom_as(const Conv2dGeometry& g) {
  auto i = [](int64_t v) { return static_cast<I>(v); };
  return {
      i(g.n),           i(g.c),        i(g.h),        i(g.w),     i(g.k),     i(g.r),     i(g.s),     i(g.p),
      i(g.q),           i(g.stride_h), i(g.stride_w), i(g.pad_h), i(g.pad_w), i(g.dil_h), i(g.dil_w), i(g.c / g.groups),
      i(g.k / g.groups)};
}

// True when every index the kernels form (element offsets and padded coordinates) fits in int32.
bool fits_int32(const Conv2dGeometry& g) {
  constexpr int64_t limit = std::numeric_limits<int32_t>::max();
  const int64_t extent_h = g.h + 2 * g.pad_h + g.stride_h + g.dil_h * g.r;
  const int64_t extent_w = g.w + 2 * g.pad_w + g.stride_w + g.dil_w * g.s;
  return g.n * g.c * g.h * g.w <= limit && g.n * g.k * g.p * g.q <= limit &&
         g.k * (g.c / g.groups) * g.r * g.s <= limit && extent_h <= limit && extent_w <= limit;
}

// ---------------------------------------------------------------- forward

template <typename T, typename I>
__global__ void forward_kernel(Geom<I> g, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                               T* __restrict__ out, int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I q = idx % g.q;
    I t = idx / g.q;
    const I p = t % g.p;
    t /= g.p;
    const I k = t % g.k, n = t / g.k;
    const I c0 = (k / g.kg) * g.cg;
    const I h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
    T acc = bias != nullptr ? bias[k] : T(0);
    for (I cc = 0; cc < g.cg; ++cc) {
      const T* xc = x + (n * g.c + c0 + cc) * g.h * g.w;
      const T* wk = w + (k * g.cg + cc) * g.r * g.s;
      for (I r = 0; r < g.r; ++r) {
        const I ih = h0 + r * g.dil_h;
        if (ih < 0 || ih >= g.h) continue;
        for (I s = 0; s < g.s; ++s) {
          const I iw = w0 + s * g.dil_w;
          if (iw >= 0 && iw < g.w) acc += wk[r * g.s + s] * xc[ih * g.w + iw];
        }
      }
    }
    out[idx] = acc;
  }
}

// ---------------------------------------------------------------- backward data

// dx[n, c, ih, iw] = sum over output channels k of c's group and taps (r, s) with
// ih = p*stride_h - pad_h + r*dil_h (and the same along w) of w[k, c % cg, r, s] * dout[n, k, p, q].
template <typename T, typename I>
__global__ void backward_data_kernel(Geom<I> g, const T* __restrict__ w, const T* __restrict__ dout, T* __restrict__ dx,
                                     int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I iw = idx % g.w;
    I t = idx / g.w;
    const I ih = t % g.h;
    t /= g.h;
    const I c = t % g.c, n = t / g.c;
    const I grp = c / g.cg, cc = c % g.cg;
    T acc = 0;
    for (I k = grp * g.kg; k < (grp + 1) * g.kg; ++k) {
      const T* go = dout + (n * g.k + k) * g.p * g.q;
      const T* wk = w + (k * g.cg + cc) * g.r * g.s;
      for (I r = 0; r < g.r; ++r) {
        const I th = ih + g.pad_h - r * g.dil_h;  // = p * stride_h
        if (th < 0) break;                        // only decreases with r
        if (th % g.stride_h != 0) continue;
        const I p = th / g.stride_h;
        if (p >= g.p) continue;
        for (I s = 0; s < g.s; ++s) {
          const I tw = iw + g.pad_w - s * g.dil_w;
          if (tw < 0) break;
          if (tw % g.stride_w != 0) continue;
          const I q = tw / g.stride_w;
          if (q < g.q) acc += wk[r * g.s + s] * go[p * g.q + q];
        }
      }
    }
    dx[idx] = acc;
  }
}

// ---------------------------------------------------------------- backward weight

// Sum of v over the block (blockDim.x == kThreads) by a fixed tree; the result is in every thread.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (static_cast<int>(threadIdx.x) < half) buf[threadIdx.x] += buf[threadIdx.x + half];
    __syncthreads();
  }
  return buf[0];
}

// Block (tap, chunk) sums dout[n, k, p, q] * x[n, c, ih, iw] over the chunk's outputs
// e = (n*P + p)*Q + q in [chunk*chunk_len, (chunk+1)*chunk_len), for the tap's weight element
// dw[k, cc, r, s]; writes dst[tap * chunks + chunk].
template <typename T, typename I>
__global__ void backward_weight_kernel(Geom<I> g, const T* __restrict__ x, const T* __restrict__ dout,
                                       T* __restrict__ dst, int64_t npq, int64_t chunk_len) {
  const I tap = static_cast<I>(blockIdx.x);
  const I s = tap % g.s, r = (tap / g.s) % g.r, cc = (tap / (g.r * g.s)) % g.cg, k = tap / (g.cg * g.r * g.s);
  const I c = (k / g.kg) * g.cg + cc;
  const I pq = g.p * g.q;
  const I off_h = r * g.dil_h - g.pad_h, off_w = s * g.dil_w - g.pad_w;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * chunk_len;
  const int64_t end = begin + chunk_len < npq ? begin + chunk_len : npq;
  T acc = 0;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    const I idx = static_cast<I>(e);
    const I n = idx / pq, rem = idx % pq;
    const I ih = (rem / g.q) * g.stride_h + off_h, iw = (rem % g.q) * g.stride_w + off_w;
    if (ih >= 0 && ih < g.h && iw >= 0 && iw < g.w)
      acc += dout[(n * g.k + k) * pq + rem] * x[((n * g.c + c) * g.h + ih) * g.w + iw];
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) dst[static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y] = acc;
}

// dw[tap] = sum of the tap's chunk partials in chunk order.
template <typename T>
__global__ void sum_chunks_kernel(const T* __restrict__ partial, T* __restrict__ dw, int64_t taps, int64_t chunks) {
  for (int64_t tap = first_index(); tap < taps; tap += grid_stride()) {
    T acc = 0;
    for (int64_t j = 0; j < chunks; ++j) acc += partial[tap * chunks + j];
    dw[tap] = acc;
  }
}

// Chunks per tap: enough blocks in all (~2048) to fill the GPU, each reducing at least ~4096
// outputs. A function of the shape only, so results do not depend on the GPU.
int64_t chunks_for(int64_t taps, int64_t npq) {
  constexpr int64_t kMinPerChunk = 4096, kTargetBlocks = 2048, kMaxChunks = 65535;  // gridDim.y limit
  const int64_t by_work = (npq + kMinPerChunk - 1) / kMinPerChunk;
  const int64_t by_blocks = (kTargetBlocks + taps - 1) / taps;
  return std::clamp<int64_t>(std::min(by_work, by_blocks), 1, kMaxChunks);
}

// ---------------------------------------------------------------- bias

// out += bias, computed in T (f32 for a bf16 out, rounded on the store).
template <typename D, typename I, typename T = opmath_t<D>>
__global__ void add_bias_kernel(D* __restrict__ out, const T* __restrict__ bias, I k, I pq, int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    out[idx] = convert<D>(load_opmath(out, idx) + bias[(idx / pq) % k]);
  }
}

}  // namespace

void direct_conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                           const Tensor& out) {
  const int64_t total = g.n * g.k * g.p * g.q;
  dispatch_float_index("conv2d", x.dtype(), fits_int32(g), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    forward_kernel<T, I><<<grid_for(total), kThreads, 0, stream()>>>(
        geom_as<I>(g), x.data<T>(), w.data<T>(), bias.defined() ? bias.data<T>() : nullptr, out.data<T>(), total);
    OCTET_CUDA_LAUNCH("conv2d direct forward");
  });
}

void direct_conv2d_backward_data(const Conv2dGeometry& g, const Tensor& w, const Tensor& dout, const Tensor& dx) {
  const int64_t total = g.n * g.c * g.h * g.w;
  dispatch_float_index("conv2d", dx.dtype(), fits_int32(g), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    backward_data_kernel<T, I>
        <<<grid_for(total), kThreads, 0, stream()>>>(geom_as<I>(g), w.data<T>(), dout.data<T>(), dx.data<T>(), total);
    OCTET_CUDA_LAUNCH("conv2d direct backward data");
  });
}

void direct_conv2d_backward_weight(const Conv2dGeometry& g, const Tensor& x, const Tensor& dout, const Tensor& dw) {
  const int64_t taps = g.k * (g.c / g.groups) * g.r * g.s;
  const int64_t npq = g.n * g.p * g.q;
  OCTET_CHECK(taps <= std::numeric_limits<int32_t>::max(), "conv2d: weight of ", taps,
              " elements is too large for the direct CUDA kernel");
  if (taps == 0) return;
  const int64_t chunks = chunks_for(taps, npq);
  const int64_t chunk_len = (npq + chunks - 1) / chunks;
  dispatch_float_index("conv2d", dw.dtype(), fits_int32(g), [&](auto t, auto i) {
    using T = decltype(t);
    using I = decltype(i);
    Tensor partial = chunks > 1 ? empty({taps * chunks}, TensorOptions(dw.dtype()).device(dw.device())) : Tensor();
    T* dst = chunks > 1 ? partial.data<T>() : dw.data<T>();
    const dim3 grid(static_cast<unsigned>(taps), static_cast<unsigned>(chunks));
    backward_weight_kernel<T, I>
        <<<grid, kThreads, 0, stream()>>>(geom_as<I>(g), x.data<T>(), dout.data<T>(), dst, npq, chunk_len);
    OCTET_CUDA_LAUNCH("conv2d direct backward weight");
    if (chunks > 1) {
      sum_chunks_kernel<T><<<grid_for(taps), kThreads, 0, stream()>>>(partial.data<T>(), dw.data<T>(), taps, chunks);
      OCTET_CUDA_LAUNCH("conv2d direct backward weight (chunk sums)");
    }
  });
}

void add_channel_bias(const Tensor& out, const Tensor& bias, int64_t n, int64_t k, int64_t pq) {
  const int64_t total = n * k * pq;
  if (total == 0) return;
  const bool small = total <= std::numeric_limits<int32_t>::max();
  dispatch_activation_index("conv2d", out.dtype(), small, [&](auto d, auto i) {
    using D = decltype(d);
    using I = decltype(i);
    add_bias_kernel<D, I><<<grid_for(total), kThreads, 0, stream()>>>(
        out.data<D>(), bias.data<opmath_t<D>>(), static_cast<I>(k), static_cast<I>(pq), total);
    OCTET_CUDA_LAUNCH("conv2d bias");
  });
}

}  // namespace octet::cuda
