// CPU 2-D convolution, NCHW, contiguous operands. f32 goes to oneDNN's convolution primitives
// (conv_dnnl.cpp) unless conv2d_selector() says loops; the plain kernels below serve f64 (gradient
// checks) and are the reference the oneDNN path is tested against.
// General path: per sample, im2col into a scratch matrix [C*R*S, P*Q] and one GEMM per group
// (oneDNN sgemm for f32, Eigen for f64); backward runs the transposed GEMMs, then col2im for dx,
// and accumulates dw over the batch with beta = 1. A 1x1, stride-1, unpadded conv skips im2col:
// the input plane already is the column matrix.
// Depthwise (groups == C > 1) has a direct kernel: im2col would turn it into C tiny GEMMs.
// Every output element is written by one thread in a fixed summation order, so results do not
// depend on the thread count (no atomics anywhere).
//   cpu::conv2d_forward(geom, x, w, bias, out);   cpu::conv2d_backward(geom, x, w, dout, dx, dw);
#include <algorithm>
#include <atomic>

#include "core/cpu/bf16.h"
#include "core/cpu/conv_dnnl.h"
#include "core/cpu/conv_taps.h"
#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/kernel_checks.h"
#include "core/memory_format.h"
#include "core/parallel.h"

namespace octet::cpu {

using kernels::ChannelsLast;
using kernels::check_conv_grads;
using kernels::check_conv_operands;
using kernels::in_kernel_layout;

namespace {

// Work per parallel chunk: enough elements that forking threads pays off.
constexpr int64_t kGrainElems = 16384;
int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, work_per_item));
}

// A 1-D view of `len` elements starting `off` elements into contiguous `t`: gemm reads
// .data<T>(), which points at a view's first element. Detached, so nothing is recorded.
Tensor flat(const Tensor& t, int64_t off, int64_t len) { return t.detach().view({t.numel()}).narrow(0, off, len); }

// col[(c*R + r)*S + s][p*Q + q] = x[c][p*sh - ph + r*dh][q*sw - pw + s*dw] (0 in the padding).
template <typename T>
void im2col(const Conv2dGeometry& g, const T* x, T* col) {
  const int64_t pq = g.p * g.q;
  parallel_for(0, g.c * g.r * g.s, grain_for(pq), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t s = row % g.s, r = (row / g.s) % g.r, c = row / (g.r * g.s);
      const T* xc = x + c * g.h * g.w;
      T* dst = col + row * pq;
      int64_t q_lo, q_hi;
      const int64_t iw0 = s * g.dil_w - g.pad_w;
      valid_range(iw0, g.stride_w, g.w, g.q, q_lo, q_hi);
      for (int64_t p = 0; p < g.p; ++p) {
        const int64_t ih = p * g.stride_h - g.pad_h + r * g.dil_h;
        T* d = dst + p * g.q;
        if (ih < 0 || ih >= g.h) {
          std::fill(d, d + g.q, T(0));
          continue;
        }
        const T* xr = xc + ih * g.w;
        std::fill(d, d + q_lo, T(0));
        for (int64_t q = q_lo; q < q_hi; ++q) d[q] = xr[iw0 + q * g.stride_w];
        std::fill(d + q_hi, d + g.q, T(0));
      }
    }
  });
}

// dx[c] = sum over (r, s) of col rows (c, r, s) scattered back; one thread per channel plane, so
// the plane is overwritten (not accumulated into) in a fixed order.
template <typename T>
void col2im(const Conv2dGeometry& g, const T* col, T* dx) {
  const int64_t pq = g.p * g.q;
  parallel_for(0, g.c, grain_for(g.r * g.s * pq), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      T* dxc = dx + c * g.h * g.w;
      std::fill(dxc, dxc + g.h * g.w, T(0));
      for (int64_t r = 0; r < g.r; ++r) {
        for (int64_t s = 0; s < g.s; ++s) {
          const T* src = col + ((c * g.r + r) * g.s + s) * pq;
          for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
            T* dr = dxc + ih * g.w;
            const T* sr = src + p * g.q;
            for (int64_t q = q_lo; q < q_hi; ++q) dr[iw0 + q * g.stride_w] += sr[q];
          });
        }
      }
    }
  });
}

// ---------------------------------------------------------------- general path (im2col + GEMM)

template <typename T>
void gemm_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  const int64_t pq = g.p * g.q, hw = g.h * g.w;
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, crs = cg * g.r * g.s;
  const bool pointwise = is_pointwise(g);
  Tensor col = pointwise ? Tensor() : empty({g.c * g.r * g.s * pq}, x.dtype());
  T* o = out.data<T>();
  for (int64_t n = 0; n < g.n; ++n) {
    if (!pointwise) im2col<T>(g, x.data<T>() + n * g.c * hw, col.data<T>());
    const Tensor& src = pointwise ? x : col;
    const int64_t src_base = pointwise ? n * g.c * hw : 0;
    double beta = 0.0;
    if (bias.defined()) {
      // Seed the output with the bias and let the GEMM add onto it.
      const T* b = bias.data<T>();
      T* on = o + n * g.k * pq;
      parallel_for(0, g.k, grain_for(pq), [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) std::fill(on + k * pq, on + (k + 1) * pq, b[k]);
      });
      beta = 1.0;
    }
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gemm(false, false, kg, pq, crs, 1.0, flat(w, grp * kg * crs, kg * crs), crs,
           flat(src, src_base + grp * crs * pq, crs * pq), pq, beta, flat(out, (n * g.k + grp * kg) * pq, kg * pq), pq);
    }
  }
}

template <typename T>
void gemm_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                   const Tensor& dw) {
  const int64_t pq = g.p * g.q, hw = g.h * g.w;
  const int64_t cg = g.c / g.groups, kg = g.k / g.groups, crs = cg * g.r * g.s;
  const bool pointwise = is_pointwise(g);
  const int64_t col_len = g.c * g.r * g.s * pq;
  Tensor xcol = dw.defined() && !pointwise ? empty({col_len}, x.dtype()) : Tensor();
  Tensor dcol = dx.defined() && !pointwise ? empty({col_len}, x.dtype()) : Tensor();
  if (dw.defined() && g.n == 0) cpu::fill(dw, 0.0);
  for (int64_t n = 0; n < g.n; ++n) {
    const int64_t dout_base = n * g.k * pq;
    if (dx.defined()) {
      // dcol_g [crs, PQ] = W_g^T [crs, kg] . dout_g [kg, PQ]
      const Tensor& dst = pointwise ? dx : dcol;
      const int64_t dst_base = pointwise ? n * g.c * hw : 0;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        gemm(true, false, crs, pq, kg, 1.0, flat(w, grp * kg * crs, kg * crs), crs,
             flat(dout, dout_base + grp * kg * pq, kg * pq), pq, 0.0, flat(dst, dst_base + grp * crs * pq, crs * pq),
             pq);
      }
      if (!pointwise) col2im<T>(g, dcol.data<T>(), dx.data<T>() + n * g.c * hw);
    }
    if (dw.defined()) {
      // dw_g [kg, crs] (+)= dout_g [kg, PQ] . col_g^T [PQ, crs]
      if (!pointwise) im2col<T>(g, x.data<T>() + n * g.c * hw, xcol.data<T>());
      const Tensor& src = pointwise ? x : xcol;
      const int64_t src_base = pointwise ? n * g.c * hw : 0;
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        gemm(false, true, kg, crs, pq, 1.0, flat(dout, dout_base + grp * kg * pq, kg * pq), pq,
             flat(src, src_base + grp * crs * pq, crs * pq), pq, n == 0 ? 0.0 : 1.0, flat(dw, grp * kg * crs, kg * crs),
             crs);
      }
    }
  }
}

// ---------------------------------------------------------------- depthwise (direct)
// Output channel k reads input channel k / m, where m = K / C is the channel multiplier.

template <typename T>
void depthwise_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* bias, T* out) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  parallel_for(0, g.n * g.k, grain_for(pq * rs), [&](int64_t begin, int64_t end) {
    for (int64_t nk = begin; nk < end; ++nk) {
      const int64_t n = nk / g.k, k = nk % g.k;
      const T* xc = x + (n * g.c + k / m) * hw;
      const T* wk = w + k * rs;
      T* o = out + nk * pq;
      std::fill(o, o + pq, bias ? bias[k] : T(0));
      for (int64_t r = 0; r < g.r; ++r) {
        for (int64_t s = 0; s < g.s; ++s) {
          const T wv = wk[r * g.s + s];
          for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
            const T* xr = xc + ih * g.w;
            T* orow = o + p * g.q;
            for (int64_t q = q_lo; q < q_hi; ++q) orow[q] += wv * xr[iw0 + q * g.stride_w];
          });
        }
      }
    }
  });
}

// dx plane (n, c) gathers from its m output channels; one thread per plane.
template <typename T>
void depthwise_backward_input(const Conv2dGeometry& g, const T* w, const T* dout, T* dx) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  parallel_for(0, g.n * g.c, grain_for(m * pq * rs), [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / g.c, c = nc % g.c;
      T* d = dx + nc * hw;
      std::fill(d, d + hw, T(0));
      for (int64_t k = c * m; k < (c + 1) * m; ++k) {
        const T* go = dout + (n * g.k + k) * pq;
        const T* wk = w + k * rs;
        for (int64_t r = 0; r < g.r; ++r) {
          for (int64_t s = 0; s < g.s; ++s) {
            const T wv = wk[r * g.s + s];
            for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
              T* dr = d + ih * g.w;
              const T* gr = go + p * g.q;
              for (int64_t q = q_lo; q < q_hi; ++q) dr[iw0 + q * g.stride_w] += wv * gr[q];
            });
          }
        }
      }
    }
  });
}

// dw[k] sums over the batch in order n = 0..N-1; one thread per output channel.
template <typename T>
void depthwise_backward_weight(const Conv2dGeometry& g, const T* x, const T* dout, T* dw) {
  const int64_t m = g.k / g.c, pq = g.p * g.q, hw = g.h * g.w, rs = g.r * g.s;
  parallel_for(0, g.k, grain_for(g.n * pq * rs), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      for (int64_t r = 0; r < g.r; ++r) {
        for (int64_t s = 0; s < g.s; ++s) {
          T acc = 0;
          for (int64_t n = 0; n < g.n; ++n) {
            const T* xc = x + (n * g.c + k / m) * hw;
            const T* go = dout + (n * g.k + k) * pq;
            for_tap_rows(g, r, s, [&](int64_t p, int64_t ih, int64_t iw0, int64_t q_lo, int64_t q_hi) {
              const T* xr = xc + ih * g.w;
              const T* gr = go + p * g.q;
              for (int64_t q = q_lo; q < q_hi; ++q) acc += gr[q] * xr[iw0 + q * g.stride_w];
            });
          }
          dw[k * rs + r * g.s + s] = acc;
        }
      }
    }
  });
}

}  // namespace

Selector<Conv2dPath>& conv2d_selector() {
  static Selector<Conv2dPath> selector{"conv2d path",
                                       "OCTET_CONV2D_PATH",
                                       {{Conv2dPath::dnnl, "dnnl"}, {Conv2dPath::loops, "loops"}},
                                       [](Conv2dPath) { return true; },
                                       [] { return Conv2dPath::dnnl; }};
  return selector;
}

// The plain kernels take NCHW: channels-last operands (core/memory_format.h) are copied in and out.
// Only a loops-path or f64 convolution of a channels-last tensor pays this.
namespace {
Tensor nchw(const Tensor& t) { return t.defined() ? t.detach().contiguous() : t; }
void copy_back(const Tensor& dst, const Tensor& src) {
  if (dst.defined() && dst.raw_data() != src.raw_data()) copy(dst, src);
}
// Whether autocast's bf16 convolutions run oneDNN's bf16 primitives (native bf16 on this CPU, and
// the oneDNN path chosen); else x and w are widened and the f32 path computes the same products.
bool native_bf16() {
  return bf16_selector().active() == Bf16Path::native && conv2d_selector().active() == Conv2dPath::dnnl;
}
}  // namespace

void conv2d_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  check_cpu("conv2d_forward", {x, w, bias, out});
  check_conv_operands("conv2d_forward", g, x, w, ChannelsLast::yes);
  // autocast: bf16 in, an f32 sum rounded to a bf16 output (or kept f32)
  const bool bf16 = x.dtype() == DType::bf16;
  const DType acc_t = bf16 ? DType::f32 : x.dtype();
  const bool out_dtype = out.dtype() == acc_t || (bf16 && out.dtype() == DType::bf16);
  OCTET_CHECK(in_kernel_layout(out, ChannelsLast::yes) && out_dtype && out.numel() == g.n * g.k * g.p * g.q,
              "conv2d_forward: expected a contiguous or channels-last ", acc_t, bf16 ? " or bf16" : "", " output of ",
              g.n * g.k * g.p * g.q, " elements, got ", out.dtype(), " ", out.shape());
  OCTET_CHECK(!bias.defined() || (bias.is_contiguous() && bias.dtype() == acc_t && bias.numel() == g.k),
              "conv2d_forward: expected a contiguous ", acc_t, " bias of ", g.k, " elements");
  if (bf16 && !native_bf16()) {
    Tensor o = out.dtype() == DType::f32 ? out : empty_f32_like(out);
    cpu::conv2d_forward(g, widened_to_f32(x), widened_to_f32(w), bias, o);
    return copy_back(out, o);
  }
  if ((x.dtype() == DType::f32 || x.dtype() == DType::bf16) && conv2d_selector().active() == Conv2dPath::dnnl)
    return dnnl_conv2d_forward(g, x, w, bias, out);
  if (!x.is_contiguous() || !out.is_contiguous()) {
    Tensor o = nchw(out);
    cpu::conv2d_forward(g, nchw(x), w, bias, o);
    return copy_back(out, o);
  }
  dispatch_float(x.dtype(), "conv2d", [&]<typename T>() {
    if (is_depthwise(g))
      depthwise_forward<T>(g, x.data<T>(), w.data<T>(), data_or_null<T>(bias), out.data<T>());
    else
      gemm_forward<T>(g, x, w, bias, out);
  });
}

void conv2d_backward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& dout, const Tensor& dx,
                     const Tensor& dw) {
  check_cpu("conv2d_backward", {x, w, dout, dx, dw});
  check_conv_operands("conv2d_backward", g, x, w, ChannelsLast::yes);
  check_conv_grads("conv2d_backward", g, x, w, dout, dx, dw, ChannelsLast::yes);
  if (!dx.defined() && !dw.defined()) return;
  if (x.dtype() == DType::bf16 && !native_bf16()) {
    Tensor d = dx.defined() && dx.dtype() == DType::bf16 ? empty_f32_like(dx) : dx;
    cpu::conv2d_backward(g, widened_to_f32(x), widened_to_f32(w), widened_to_f32(dout), d, dw);
    return copy_back(dx, d);
  }
  if ((x.dtype() == DType::f32 || x.dtype() == DType::bf16) && conv2d_selector().active() == Conv2dPath::dnnl)
    return dnnl_conv2d_backward(g, x, w, dout, dx, dw);
  if (!x.is_contiguous() || !dout.is_contiguous() || (dx.defined() && !dx.is_contiguous())) {
    Tensor d = nchw(dx);
    cpu::conv2d_backward(g, nchw(x), w, nchw(dout), d, dw);
    return copy_back(dx, d);
  }
  dispatch_float(x.dtype(), "conv2d", [&]<typename T>() {
    if (is_depthwise(g)) {
      if (dx.defined()) depthwise_backward_input<T>(g, w.data<T>(), dout.data<T>(), dx.data<T>());
      if (dw.defined()) depthwise_backward_weight<T>(g, x.data<T>(), dout.data<T>(), dw.data<T>());
    } else {
      gemm_backward<T>(g, x, w, dout, dx, dw);
    }
  });
}

}  // namespace octet::cpu
