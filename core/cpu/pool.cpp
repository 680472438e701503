// CPU 2-D pooling, NCHW, contiguous, f32 and f64: max (with argmax indices; also channels-last), average
// (PyTorch's count_include_pad semantics, floor output size) and adaptive average (PyTorch's
// windows [floor(i*H/P), ceil((i+1)*H/P))). Work is split over the N*C planes; a backward
// writes only its own dx plane in a fixed order, so results never depend on the thread count.
//   cpu::max_pool2d_forward(geom, x, out, indices);   cpu::max_pool2d_backward(geom, dout, indices, dx);
#include <algorithm>
#include <cmath>

#include "core/cpu/bf16.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/kernel_checks.h"
#include "core/memory_format.h"
#include "core/parallel.h"

namespace octet::cpu {

using kernels::adaptive_shape;
using kernels::AdaptiveShape;
using kernels::check_plane_tensor;

namespace {

constexpr int64_t kGrainElems = 16384;
int64_t grain_for(int64_t work_per_plane) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, work_per_plane));
}

// Clipped average-pooling window along one axis and the size PyTorch divides by with padding.
struct AvgWindow {
  int64_t start, end, padded_len;
};
AvgWindow avg_window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t in) {
  int64_t start = o * stride - pad;
  int64_t end = std::min(start + kernel, in + pad);
  int64_t padded = end - start;
  return {std::max<int64_t>(start, 0), std::min(end, in), padded};
}

// A pooling operand: contiguous, or with `channels_last` a 4-D channels-last tensor (max pooling's
// channels-last kernels, core/memory_format.h).
void check_pool_tensor(const char* op, const char* what, const Tensor& t, int64_t numel, bool channels_last) {
  if (!channels_last) return check_plane_tensor(op, what, t, numel);
  OCTET_CHECK(t.dim() == 4 && is_channels_last(t) && t.numel() == numel, op, ": expected a channels-last ", what,
              " of ", numel, " elements, got shape ", t.shape(), " with strides ", t.strides());
}

int64_t avg_divisor(const Pool2dGeometry& g, const AvgWindow& wh, const AvgWindow& ww) {
  return g.count_include_pad ? wh.padded_len * ww.padded_len : (wh.end - wh.start) * (ww.end - ww.start);
}

// ---------------------------------------------------------------- max

// Taps t in [lo, hi) of a window whose input index base + t*dil lies in [0, limit).
void tap_range(int64_t base, int64_t dil, int64_t limit, int64_t taps, int64_t& lo, int64_t& hi) {
  lo = base >= 0 ? 0 : (-base + dil - 1) / dil;
  hi = base > limit - 1 ? 0 : std::min(taps, (limit - 1 - base) / dil + 1);
  lo = std::min(lo, hi);
}

template <typename T>
void max_forward(const Pool2dGeometry& g, const T* x, T* out, int64_t* indices) {
  const int64_t hw = g.h * g.w, pq = g.p * g.q;
  parallel_for(0, g.n * g.c, grain_for(pq * g.kh * g.kw), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* xp = x + plane * hw;
      T* op = out + plane * pq;
      int64_t* ip = indices + plane * pq;
      for (int64_t p = 0; p < g.p; ++p) {
        const int64_t h0 = p * g.stride_h - g.pad_h;
        int64_t r_lo, r_hi;
        tap_range(h0, g.dil_h, g.h, g.kh, r_lo, r_hi);
        for (int64_t q = 0; q < g.q; ++q) {
          const int64_t w0 = q * g.stride_w - g.pad_w;
          int64_t s_lo, s_hi;
          tap_range(w0, g.dil_w, g.w, g.kw, s_lo, s_hi);
          if (r_lo == r_hi || s_lo == s_hi) {  // a window entirely in the padding
            op[p * g.q + q] = -INFINITY;
            ip[p * g.q + q] = -1;
            continue;
          }
          // Padding acts as -inf, so only taps inside the plane compete. The first maximum wins
          // and a NaN beats numbers (PyTorch propagates it). Selects, not branches: on random
          // data the comparison is unpredictable.
          int64_t best_idx = (h0 + r_lo * g.dil_h) * g.w + w0 + s_lo * g.dil_w;
          T best = xp[best_idx];
          for (int64_t r = r_lo; r < r_hi; ++r) {
            const int64_t row = (h0 + r * g.dil_h) * g.w + w0;
            for (int64_t s = s_lo; s < s_hi; ++s) {
              const int64_t i = row + s * g.dil_w;
              const T v = xp[i];
              const bool take = v > best || (v != v && best == best);
              best = take ? v : best;
              best_idx = take ? i : best_idx;
            }
          }
          op[p * g.q + q] = best;
          ip[p * g.q + q] = best_idx;
        }
      }
    }
  });
}

template <typename T>
void max_backward(const Pool2dGeometry& g, const T* dout, const int64_t* indices, T* dx) {
  const int64_t hw = g.h * g.w, pq = g.p * g.q;
  parallel_for(0, g.n * g.c, grain_for(hw + pq), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      T* d = dx + plane * hw;
      const T* go = dout + plane * pq;
      const int64_t* ip = indices + plane * pq;
      std::fill(d, d + hw, T(0));
      for (int64_t i = 0; i < pq; ++i)
        if (ip[i] >= 0 && ip[i] < hw) d[ip[i]] += go[i];  // -1: a window with no input
    }
  });
}

// Channels-last ([N, H, W, C] memory; core/memory_format.h): the same windows, the taps in the same
// order and the same first-maximum and NaN rule for every channel, in vectors along C; indices are
// plane indices (h * W + w) as in NCHW. The backward adds each output's gradient in output order
// as the NCHW loop does, so both layouts give the same bits.
template <typename T>
void max_forward_cl(const Pool2dGeometry& g, const T* x, T* out, int64_t* indices) {
  const int64_t c = g.c;
  parallel_for(0, g.n * g.p, grain_for(g.q * g.kh * g.kw * c), [&](int64_t begin, int64_t end) {
    for (int64_t np = begin; np < end; ++np) {
      const int64_t n = np / g.p, p = np % g.p;
      const T* xn = x + n * g.h * g.w * c;
      const int64_t h0 = p * g.stride_h - g.pad_h;
      int64_t r_lo, r_hi;
      tap_range(h0, g.dil_h, g.h, g.kh, r_lo, r_hi);
      for (int64_t q = 0; q < g.q; ++q) {
        T* op = out + (np * g.q + q) * c;
        int64_t* ip = indices + (np * g.q + q) * c;
        const int64_t w0 = q * g.stride_w - g.pad_w;
        int64_t s_lo, s_hi;
        tap_range(w0, g.dil_w, g.w, g.kw, s_lo, s_hi);
        if (r_lo == r_hi || s_lo == s_hi) {
          std::fill(op, op + c, -INFINITY);
          std::fill(ip, ip + c, int64_t{-1});
          continue;
        }
        const int64_t first = (h0 + r_lo * g.dil_h) * g.w + w0 + s_lo * g.dil_w;
        std::copy(xn + first * c, xn + (first + 1) * c, op);
        std::fill(ip, ip + c, first);
        for (int64_t r = r_lo; r < r_hi; ++r) {
          const int64_t row = (h0 + r * g.dil_h) * g.w + w0;
          for (int64_t s = s_lo; s < s_hi; ++s) {
            const int64_t i = row + s * g.dil_w;
            const T* xv = xn + i * c;
            for (int64_t k = 0; k < c; ++k) {
              const T v = xv[k], best = op[k];
              const bool take = v > best || (v != v && best == best);
              op[k] = take ? v : best;
              ip[k] = take ? i : ip[k];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void max_backward_cl(const Pool2dGeometry& g, const T* dout, const int64_t* indices, T* dx) {
  const int64_t hw = g.h * g.w, pq = g.p * g.q, c = g.c;
  parallel_for(0, g.n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      T* d = dx + n * hw * c;
      std::fill(d, d + hw * c, T(0));
      for (int64_t i = 0; i < pq; ++i) {
        const T* go = dout + (n * pq + i) * c;
        const int64_t* ip = indices + (n * pq + i) * c;
        for (int64_t k = 0; k < c; ++k)
          if (ip[k] >= 0 && ip[k] < hw) d[ip[k] * c + k] += go[k];  // -1: a window with no input
      }
    }
  });
}

// ---------------------------------------------------------------- average

template <typename T>
void avg_forward(const Pool2dGeometry& g, const T* x, T* out) {
  const int64_t hw = g.h * g.w, pq = g.p * g.q;
  parallel_for(0, g.n * g.c, grain_for(pq * g.kh * g.kw), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* xp = x + plane * hw;
      T* op = out + plane * pq;
      for (int64_t p = 0; p < g.p; ++p) {
        const AvgWindow wh = avg_window(p, g.stride_h, g.pad_h, g.kh, g.h);
        for (int64_t q = 0; q < g.q; ++q) {
          const AvgWindow ww = avg_window(q, g.stride_w, g.pad_w, g.kw, g.w);
          opmath_t<T> acc = 0;  // f32 for bf16
          for (int64_t ih = wh.start; ih < wh.end; ++ih)
            for (int64_t iw = ww.start; iw < ww.end; ++iw) acc += xp[ih * g.w + iw];
          const int64_t div = avg_divisor(g, wh, ww);
          op[p * g.q + q] = static_cast<T>(div > 0 ? acc / static_cast<opmath_t<T>>(div) : 0);
        }
      }
    }
  });
}

template <typename T>
void avg_backward(const Pool2dGeometry& g, const T* dout, T* dx) {
  const int64_t hw = g.h * g.w, pq = g.p * g.q;
  parallel_for(0, g.n * g.c, grain_for(pq * g.kh * g.kw), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      T* d = dx + plane * hw;
      const T* go = dout + plane * pq;
      std::fill(d, d + hw, T(0));
      for (int64_t p = 0; p < g.p; ++p) {
        const AvgWindow wh = avg_window(p, g.stride_h, g.pad_h, g.kh, g.h);
        for (int64_t q = 0; q < g.q; ++q) {
          const AvgWindow ww = avg_window(q, g.stride_w, g.pad_w, g.kw, g.w);
          const int64_t div = avg_divisor(g, wh, ww);
          if (div <= 0) continue;
          const T v = go[p * g.q + q] / static_cast<T>(div);
          for (int64_t ih = wh.start; ih < wh.end; ++ih)
            for (int64_t iw = ww.start; iw < ww.end; ++iw) d[ih * g.w + iw] += v;
        }
      }
    }
  });
}

// ---------------------------------------------------------------- adaptive average

int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t adaptive_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

template <typename T>
void adaptive_forward(int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, const T* x, T* out) {
  const int64_t hw = h * w, pq = ph * pw;
  parallel_for(0, planes, grain_for(hw + pq), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* xp = x + plane * hw;
      T* op = out + plane * pq;
      for (int64_t p = 0; p < ph; ++p) {
        const int64_t h0 = adaptive_start(p, h, ph), h1 = adaptive_end(p, h, ph);
        for (int64_t q = 0; q < pw; ++q) {
          const int64_t w0 = adaptive_start(q, w, pw), w1 = adaptive_end(q, w, pw);
          opmath_t<T> acc = 0;  // f32 for bf16
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) acc += xp[ih * w + iw];
          op[p * pw + q] = static_cast<T>(acc / static_cast<opmath_t<T>>((h1 - h0) * (w1 - w0)));
        }
      }
    }
  });
}

template <typename T>
void adaptive_backward(int64_t planes, int64_t h, int64_t w, int64_t ph, int64_t pw, const T* dout, T* dx) {
  const int64_t hw = h * w, pq = ph * pw;
  parallel_for(0, planes, grain_for(hw + pq), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      T* d = dx + plane * hw;
      const T* go = dout + plane * pq;
      std::fill(d, d + hw, T(0));
      for (int64_t p = 0; p < ph; ++p) {
        const int64_t h0 = adaptive_start(p, h, ph), h1 = adaptive_end(p, h, ph);
        for (int64_t q = 0; q < pw; ++q) {
          const int64_t w0 = adaptive_start(q, w, pw), w1 = adaptive_end(q, w, pw);
          const T v = go[p * pw + q] / static_cast<T>((h1 - h0) * (w1 - w0));
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) d[ih * w + iw] += v;
        }
      }
    }
  });
}

// A pool's backward on bf16 gradients (autocast's activations): the f32 kernel `run(dout32, dx32)`
// on the widened gradient, so overlapping windows add in f32, and dx rounded once.
template <typename Run>
void bf16_through_f32(const Tensor& dout, const Tensor& dx, Run run) {
  Tensor dx32 = empty_f32_like(dx);
  run(widened_to_f32(dout), dx32);
  copy(dx, dx32);
}

}  // namespace

void max_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out, const Tensor& indices) {
  check_cpu("max_pool2d_forward", {x, out, indices});
  const bool cl = !x.is_contiguous();  // then every operand channels-last
  check_pool_tensor("max_pool2d_forward", "input", x, g.n * g.c * g.h * g.w, cl);
  check_pool_tensor("max_pool2d_forward", "output", out, g.n * g.c * g.p * g.q, cl);
  check_pool_tensor("max_pool2d_forward", "indices", indices, g.n * g.c * g.p * g.q, cl);
  OCTET_CHECK(out.dtype() == x.dtype(), "max_pool2d_forward: dtypes differ: ", x.dtype(), " and ", out.dtype());
  dispatch_activation(x.dtype(), "max_pool2d", [&]<typename T>() {
    if (cl)
      max_forward_cl<T>(g, x.data<T>(), out.data<T>(), indices.data<int64_t>());
    else
      max_forward<T>(g, x.data<T>(), out.data<T>(), indices.data<int64_t>());
  });
}

void max_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& indices, const Tensor& dx) {
  check_cpu("max_pool2d_backward", {dout, indices, dx});
  const bool cl = !dx.is_contiguous();  // then every operand channels-last
  check_pool_tensor("max_pool2d_backward", "dout", dout, g.n * g.c * g.p * g.q, cl);
  check_pool_tensor("max_pool2d_backward", "indices", indices, g.n * g.c * g.p * g.q, cl);
  check_pool_tensor("max_pool2d_backward", "dx", dx, g.n * g.c * g.h * g.w, cl);
  OCTET_CHECK(dout.dtype() == dx.dtype(), "max_pool2d_backward: dtypes differ: ", dout.dtype(), " and ", dx.dtype());
  if (dx.dtype() == DType::bf16)
    return bf16_through_f32(dout, dx,
                            [&](const Tensor& d, const Tensor& x) { cpu::max_pool2d_backward(g, d, indices, x); });
  dispatch_float(dx.dtype(), "max_pool2d", [&]<typename T>() {
    if (cl)
      max_backward_cl<T>(g, dout.data<T>(), indices.data<int64_t>(), dx.data<T>());
    else
      max_backward<T>(g, dout.data<T>(), indices.data<int64_t>(), dx.data<T>());
  });
}

void avg_pool2d_forward(const Pool2dGeometry& g, const Tensor& x, const Tensor& out) {
  check_cpu("avg_pool2d_forward", {x, out});
  check_plane_tensor("avg_pool2d_forward", "input", x, g.n * g.c * g.h * g.w);
  check_plane_tensor("avg_pool2d_forward", "output", out, g.n * g.c * g.p * g.q);
  OCTET_CHECK(out.dtype() == x.dtype(), "avg_pool2d_forward: dtypes differ: ", x.dtype(), " and ", out.dtype());
  dispatch_activation(x.dtype(), "avg_pool2d", [&]<typename T>() { avg_forward<T>(g, x.data<T>(), out.data<T>()); });
}

void avg_pool2d_backward(const Pool2dGeometry& g, const Tensor& dout, const Tensor& dx) {
  check_cpu("avg_pool2d_backward", {dout, dx});
  check_plane_tensor("avg_pool2d_backward", "dout", dout, g.n * g.c * g.p * g.q);
  check_plane_tensor("avg_pool2d_backward", "dx", dx, g.n * g.c * g.h * g.w);
  OCTET_CHECK(dout.dtype() == dx.dtype(), "avg_pool2d_backward: dtypes differ: ", dout.dtype(), " and ", dx.dtype());
  if (dx.dtype() == DType::bf16)
    return bf16_through_f32(dout, dx, [&](const Tensor& d, const Tensor& x) { cpu::avg_pool2d_backward(g, d, x); });
  dispatch_float(dx.dtype(), "avg_pool2d", [&]<typename T>() { avg_backward<T>(g, dout.data<T>(), dx.data<T>()); });
}

void adaptive_avg_pool2d_forward(const Tensor& x, const Tensor& out) {
  check_cpu("adaptive_avg_pool2d_forward", {x, out});
  AdaptiveShape a = adaptive_shape("adaptive_avg_pool2d_forward", x, out);
  dispatch_activation(x.dtype(), "adaptive_avg_pool2d", [&]<typename T>() {
    adaptive_forward<T>(a.planes, a.h, a.w, a.p, a.q, x.data<T>(), out.data<T>());
  });
}

void adaptive_avg_pool2d_backward(const Tensor& dout, const Tensor& dx) {
  check_cpu("adaptive_avg_pool2d_backward", {dout, dx});
  AdaptiveShape a = adaptive_shape("adaptive_avg_pool2d_backward", dx, dout);
  if (dx.dtype() == DType::bf16)
    return bf16_through_f32(dout, dx,
                            [](const Tensor& d, const Tensor& x) { cpu::adaptive_avg_pool2d_backward(d, x); });
  dispatch_float(dx.dtype(), "adaptive_avg_pool2d", [&]<typename T>() {
    adaptive_backward<T>(a.planes, a.h, a.w, a.p, a.q, dout.data<T>(), dx.data<T>());
  });
}

}  // namespace octet::cpu
