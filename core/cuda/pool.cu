// CUDA 2-D pooling, NCHW, contiguous, f32 and f64, same semantics as core/cpu/pool.cpp: max (with
// argmax indices h*W+w inside each input plane; a window entirely in the padding gives -inf and
// index -1; NaN wins), average (count_include_pad, floor output size) and adaptive average
// (PyTorch's windows [floor(i*H/P), ceil((i+1)*H/P))). Pooling is memory-bound: plain kernels, one
// thread per output element forward. Backward passes gather instead of scattering: one thread per
// dx element visits the outputs whose window covers it in (p, q) order, which is the order the CPU
// kernel adds them in, so there are no atomics and results are deterministic.
// bf16 activations (autocast's) are loaded into f32, summed there and rounded once on the store, as
// the CPU's kernels do (its backward runs the f32 kernel on the widened gradient: the same sums).
// Indices are 32-bit when every tensor has fewer than 2^31 elements, 64-bit otherwise.
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/cuda/cuda_util.h"
#include "core/cuda/device_util.cuh"
#include "core/cuda/kernels.h"
#include "core/cuda/launch.cuh"
#include "core/kernel_checks.h"

namespace octet::cuda {

using kernels::adaptive_shape;
using kernels::AdaptiveShape;
using kernels::check_plane_tensor;

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

template <typename I>
struct Geom {
  I h, w, p, q, kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  bool count_include_pad;
};

template <typename I>
Geom<I> geom_as(const Pool2dGeometry& g) {
  auto i = [](int64_t v) { return static_cast<I>(v); };
  return {i(g.h),
          i(g.w),
          i(g.p),
          i(g.q),
          i(g.kh),
          i(g.kw),
          i(g.stride_h),
          i(g.stride_w),
          i(g.pad_h),
          i(g.pad_w),
          i(g.dil_h),
          i(g.dil_w),
          g.count_include_pad};
}

bool fits_int32(const Pool2dGeometry& g) {
  const int64_t extent_h = g.h + 2 * g.pad_h + g.stride_h + g.dil_h * g.kh;
  const int64_t extent_w = g.w + 2 * g.pad_w + g.stride_w + g.dil_w * g.kw;
  return g.n * g.c * g.h * g.w <= kInt32Max && g.n * g.c * g.p * g.q <= kInt32Max && extent_h <= kInt32Max &&
         extent_w <= kInt32Max;
}

template <typename I>
__device__ inline I min_of(I a, I b) {
  return a < b ? a : b;
}
template <typename I>
__device__ inline I max_of(I a, I b) {
  return a > b ? a : b;
}

// Outputs o in [lo, hi] (inclusive; empty when lo > hi) whose window o*stride - pad + [0, span)
// may contain input position i.
template <typename I>
__device__ inline void covering_outputs(I i, I stride, I pad, I span, I out_len, I& lo, I& hi) {
  const I first = i + pad - span + 1;  // o*stride >= first
  lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  hi = min_of<I>((i + pad) / stride, out_len - 1);
}

// ---------------------------------------------------------------- max

// Taps t in [lo, hi) of a window whose input index base + t*dil lies in [0, limit).
template <typename I>
__device__ inline void tap_range(I base, I dil, I limit, I taps, I& lo, I& hi) {
  lo = base >= 0 ? 0 : (-base + dil - 1) / dil;
  hi = base > limit - 1 ? 0 : min_of<I>(taps, (limit - 1 - base) / dil + 1);
  lo = min_of(lo, hi);
}

template <typename D, typename I, typename T = opmath_t<D>>
__global__ void max_forward_kernel(Geom<I> g, const D* __restrict__ x, D* __restrict__ out,
                                   int64_t* __restrict__ indices, int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I q = idx % g.q, p = (idx / g.q) % g.p, plane = idx / (g.q * g.p);
    const D* xp = x + plane * g.h * g.w;
    const I h0 = p * g.stride_h - g.pad_h, w0 = q * g.stride_w - g.pad_w;
    I r_lo, r_hi, s_lo, s_hi;
    tap_range(h0, g.dil_h, g.h, g.kh, r_lo, r_hi);
    tap_range(w0, g.dil_w, g.w, g.kw, s_lo, s_hi);
    if (r_lo == r_hi || s_lo == s_hi) {  // a window entirely in the padding
      out[idx] = convert<D>(-static_cast<T>(INFINITY));
      indices[idx] = -1;
      continue;
    }
    // Padding acts as -inf; the first maximum wins and a NaN beats numbers (as on the CPU).
    I best_idx = (h0 + r_lo * g.dil_h) * g.w + w0 + s_lo * g.dil_w;
    T best = load_opmath(xp, best_idx);
    for (I r = r_lo; r < r_hi; ++r) {
      const I row = (h0 + r * g.dil_h) * g.w + w0;
      for (I s = s_lo; s < s_hi; ++s) {
        const I j = row + s * g.dil_w;
        const T v = load_opmath(xp, j);
        if (v > best || (v != v && best == best)) {
          best = v;
          best_idx = j;
        }
      }
    }
    out[idx] = convert<D>(best);  // exact: a value of x
    indices[idx] = best_idx;
  }
}

// dx at (ih, iw) sums dout over the outputs whose recorded index is this position.
template <typename D, typename I, typename T = opmath_t<D>>
__global__ void max_backward_kernel(Geom<I> g, const D* __restrict__ dout, const int64_t* __restrict__ indices,
                                    D* __restrict__ dx, int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I iw = idx % g.w, ih = (idx / g.w) % g.h, plane = idx / (g.w * g.h);
    const D* go = dout + plane * g.p * g.q;
    const int64_t* ip = indices + plane * g.p * g.q;
    const int64_t target = static_cast<int64_t>(ih) * g.w + iw;
    I p_lo, p_hi, q_lo, q_hi;
    covering_outputs<I>(ih, g.stride_h, g.pad_h, (g.kh - 1) * g.dil_h + 1, g.p, p_lo, p_hi);
    covering_outputs<I>(iw, g.stride_w, g.pad_w, (g.kw - 1) * g.dil_w + 1, g.q, q_lo, q_hi);
    T acc = 0;
    for (I p = p_lo; p <= p_hi; ++p)
      for (I q = q_lo; q <= q_hi; ++q)
        if (ip[p * g.q + q] == target) acc += load_opmath(go, p * g.q + q);
    dx[idx] = convert<D>(acc);
  }
}

// ---------------------------------------------------------------- average

// Clipped window [start, end) along one axis and the length PyTorch divides by with padding.
template <typename I>
struct AvgWindow {
  I start, end, padded_len;
};
template <typename I>
__device__ inline AvgWindow<I> avg_window(I o, I stride, I pad, I kernel, I in) {
  const I start = o * stride - pad;
  const I end = min_of<I>(start + kernel, in + pad);
  return {max_of<I>(start, 0), min_of<I>(end, in), end - start};
}

template <typename I>
__device__ inline I avg_divisor(const Geom<I>& g, const AvgWindow<I>& wh, const AvgWindow<I>& ww) {
  return g.count_include_pad ? wh.padded_len * ww.padded_len : (wh.end - wh.start) * (ww.end - ww.start);
}

template <typename D, typename I, typename T = opmath_t<D>>
__global__ void avg_forward_kernel(Geom<I> g, const D* __restrict__ x, D* __restrict__ out, int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I q = idx % g.q, p = (idx / g.q) % g.p, plane = idx / (g.q * g.p);
    const D* xp = x + plane * g.h * g.w;
    const AvgWindow<I> wh = avg_window<I>(p, g.stride_h, g.pad_h, g.kh, g.h);
    const AvgWindow<I> ww = avg_window<I>(q, g.stride_w, g.pad_w, g.kw, g.w);
    T acc = 0;
    for (I ih = wh.start; ih < wh.end; ++ih)
      for (I iw = ww.start; iw < ww.end; ++iw) acc += load_opmath(xp, ih * g.w + iw);
    const I div = avg_divisor(g, wh, ww);
    out[idx] = convert<D>(div > 0 ? acc / static_cast<T>(div) : T(0));
  }
}

template <typename D, typename I, typename T = opmath_t<D>>
__global__ void avg_backward_kernel(Geom<I> g, const D* __restrict__ dout, D* __restrict__ dx, int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I iw = idx % g.w, ih = (idx / g.w) % g.h, plane = idx / (g.w * g.h);
    const D* go = dout + plane * g.p * g.q;
    I p_lo, p_hi, q_lo, q_hi;
    covering_outputs<I>(ih, g.stride_h, g.pad_h, g.kh, g.p, p_lo, p_hi);
    covering_outputs<I>(iw, g.stride_w, g.pad_w, g.kw, g.q, q_lo, q_hi);
    T acc = 0;
    for (I p = p_lo; p <= p_hi; ++p) {
      const AvgWindow<I> wh = avg_window<I>(p, g.stride_h, g.pad_h, g.kh, g.h);
      if (ih < wh.start || ih >= wh.end) continue;
      for (I q = q_lo; q <= q_hi; ++q) {
        const AvgWindow<I> ww = avg_window<I>(q, g.stride_w, g.pad_w, g.kw, g.w);
        if (iw < ww.start || iw >= ww.end) continue;
        const I div = avg_divisor(g, wh, ww);
        if (div > 0) acc += load_opmath(go, p * g.q + q) / static_cast<T>(div);
      }
    }
    dx[idx] = convert<D>(acc);
  }
}

// ---------------------------------------------------------------- adaptive average

// Window [start, end) of output o along an axis of `in` inputs and `out` outputs. In int64: o*in
// can pass 2^31 even when both fit.
__device__ inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
__device__ inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

template <typename D, typename I, typename T = opmath_t<D>>
__global__ void adaptive_forward_kernel(I h, I w, I ph, I pw, const D* __restrict__ x, D* __restrict__ out,
                                        int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I q = idx % pw, p = (idx / pw) % ph, plane = idx / (pw * ph);
    const D* xp = x + plane * h * w;
    const I h0 = static_cast<I>(adaptive_start(p, h, ph)), h1 = static_cast<I>(adaptive_end(p, h, ph));
    const I w0 = static_cast<I>(adaptive_start(q, w, pw)), w1 = static_cast<I>(adaptive_end(q, w, pw));
    T acc = 0;
    for (I ih = h0; ih < h1; ++ih)
      for (I iw = w0; iw < w1; ++iw) acc += load_opmath(xp, ih * w + iw);
    out[idx] = convert<D>(acc / static_cast<T>(static_cast<int64_t>(h1 - h0) * (w1 - w0)));
  }
}

// Outputs o in [lo, hi] whose adaptive window may contain input position i: end(o) > i holds
// from o = floor(i*out/in) on and start(o) <= i up to o = floor(((i+1)*out - 1)/in).
__device__ inline void adaptive_covering(int64_t i, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = i * out / in;
  hi = ((i + 1) * out - 1) / in;
  if (hi > out - 1) hi = out - 1;
}

template <typename D, typename I, typename T = opmath_t<D>>
__global__ void adaptive_backward_kernel(I h, I w, I ph, I pw, const D* __restrict__ dout, D* __restrict__ dx,
                                         int64_t total) {
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const I idx = static_cast<I>(i);
    const I iw = idx % w, ih = (idx / w) % h, plane = idx / (w * h);
    const D* go = dout + plane * ph * pw;
    int64_t p_lo, p_hi, q_lo, q_hi;
    adaptive_covering(ih, h, ph, p_lo, p_hi);
    adaptive_covering(iw, w, pw, q_lo, q_hi);
    T acc = 0;
    for (int64_t p = p_lo; p <= p_hi; ++p) {
      const int64_t h0 = adaptive_start(p, h, ph), h1 = adaptive_end(p, h, ph);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t q = q_lo; q <= q_hi; ++q) {
        const int64_t w0 = adaptive_start(q, w, pw), w1 = adaptive_end(q, w, pw);
        if (iw < w0 || iw >= w1) continue;
        acc += load_opmath(go, p * pw + q) / static_cast<T>((h1 - h0) * (w1 - w0));
      }
    }
    dx[idx] = convert<D>(acc);
  }
}

// ---------------------------------------------------------------- checks

}  // namespace

void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out, const Tensor& indices) {
  check_plane_tensor("max_pool2d_forward", "input", x, g.n * g.c * g.h * g.w);
  check_plane_tensor("max_pool2d_forward", "output", out, g.n * g.c * g.p * g.q);
  check_plane_tensor("max_pool2d_forward", "indices", indices, g.n * g.c * g.p * g.q);
  OCTET_CHECK(out.dtype() == x.dtype(), "max_pool2d_forward: dtypes differ: ", x.dtype(), " and ", out.dtype());
  const int64_t total = out.numel();
  if (total == 0) return;
  dispatch_activation_index("max_pool2d", x.dtype(), fits_int32(g), [&](auto d, auto i) {
    using D = decltype(d);
    using I = decltype(i);
    max_forward_kernel<D, I><<<grid_for(total), kThreads, 0, stream()>>>(geom_as<I>(g), x.data<D>(), out.data<D>(),
                                                                         indices.data<int64_t>(), total);
    OCTET_CUDA_LAUNCH("max_pool2d forward");
  });
}

void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& indices, const Tensor& dx) {
  check_plane_tensor("max_pool2d_backward", "dout", dout, g.n * g.c * g.p * g.q);
  check_plane_tensor("max_pool2d_backward", "indices", indices, g.n * g.c * g.p * g.q);
  check_plane_tensor("max_pool2d_backward", "dx", dx, g.n * g.c * g.h * g.w);
  OCTET_CHECK(dout.dtype() == dx.dtype(), "max_pool2d_backward: dtypes differ: ", dout.dtype(), " and ", dx.dtype());
  const int64_t total = dx.numel();
  if (total == 0) return;
  dispatch_activation_index("max_pool2d", dx.dtype(), fits_int32(g), [&](auto d, auto i) {
    using D = decltype(d);
    using I = decltype(i);
    max_backward_kernel<D, I><<<grid_for(total), kThreads, 0, stream()>>>(geom_as<I>(g), dout.data<D>(),
                                                                          indices.data<int64_t>(), dx.data<D>(), total);
    OCTET_CUDA_LAUNCH("max_pool2d backward");
  });
}

void avg_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out) {
  check_plane_tensor("avg_pool2d_forward", "input", x, g.n * g.c * g.h * g.w);
  check_plane_tensor("avg_pool2d_forward", "output", out, g.n * g.c * g.p * g.q);
  OCTET_CHECK(out.dtype() == x.dtype(), "avg_pool2d_forward: dtypes differ: ", x.dtype(), " and ", out.dtype());
  const int64_t total = out.numel();
  if (total == 0) return;
  dispatch_activation_index("avg_pool2d", x.dtype(), fits_int32(g), [&](auto d, auto i) {
    using D = decltype(d);
    using I = decltype(i);
    avg_forward_kernel<D, I>
        <<<grid_for(total), kThreads, 0, stream()>>>(geom_as<I>(g), x.data<D>(), out.data<D>(), total);
    OCTET_CUDA_LAUNCH("avg_pool2d forward");
  });
}

void avg_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& dx) {
  check_plane_tensor("avg_pool2d_backward", "dout", dout, g.n * g.c * g.p * g.q);
  check_plane_tensor("avg_pool2d_backward", "dx", dx, g.n * g.c * g.h * g.w);
  OCTET_CHECK(dout.dtype() == dx.dtype(), "avg_pool2d_backward: dtypes differ: ", dout.dtype(), " and ", dx.dtype());
  const int64_t total = dx.numel();
  if (total == 0) return;
  dispatch_activation_index("avg_pool2d", dx.dtype(), fits_int32(g), [&](auto d, auto i) {
    using D = decltype(d);
    using I = decltype(i);
    avg_backward_kernel<D, I>
        <<<grid_for(total), kThreads, 0, stream()>>>(geom_as<I>(g), dout.data<D>(), dx.data<D>(), total);
    OCTET_CUDA_LAUNCH("avg_pool2d backward");
  });
}

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out) {
  const AdaptiveShape a = adaptive_shape("adaptive_avg_pool2d_forward", x, out);
  const int64_t total = out.numel();
  if (total == 0) return;
  OCTET_CHECK(a.h > 0 && a.w > 0, "adaptive_avg_pool2d_forward: expected a nonempty input plane, got ", x.shape());
  const bool small = x.numel() <= kInt32Max && total <= kInt32Max;
  dispatch_activation_index("adaptive_avg_pool2d", x.dtype(), small, [&](auto d, auto i) {
    using D = decltype(d);
    using I = decltype(i);
    adaptive_forward_kernel<D, I><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<I>(a.h), static_cast<I>(a.w),
                                                                              static_cast<I>(a.p), static_cast<I>(a.q),
                                                                              x.data<D>(), out.data<D>(), total);
    OCTET_CUDA_LAUNCH("adaptive_avg_pool2d forward");
  });
}

void adaptive_avg_pool2d_backward(const Tensor& dout, const Tensor& dx) {
  const AdaptiveShape a = adaptive_shape("adaptive_avg_pool2d_backward", dx, dout);
  const int64_t total = dx.numel();
  if (total == 0) return;
  const bool small = dout.numel() <= kInt32Max && total <= kInt32Max;
  dispatch_activation_index("adaptive_avg_pool2d", dx.dtype(), small, [&](auto d, auto i) {
    using D = decltype(d);
    using I = decltype(i);
    adaptive_backward_kernel<D, I><<<grid_for(total), kThreads, 0, stream()>>>(static_cast<I>(a.h), static_cast<I>(a.w),
                                                                               static_cast<I>(a.p), static_cast<I>(a.q),
                                                                               dout.data<D>(), dx.data<D>(), total);
    OCTET_CUDA_LAUNCH("adaptive_avg_pool2d backward");
  });
}

}  // namespace octet::cuda
