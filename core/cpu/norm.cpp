// CPU batch norm (training mode): one kernel for the statistics and the normalization, one for the
// whole backward, instead of the ~10 elementwise passes the composite formula makes. Each channel
// is reduced by one thread in a fixed order (deterministic); sums accumulate in f64, in 8 lanes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"
#include "core/cpu/norm_stats.h"
#include "core/kernel_checks.h"

namespace octet::cpu {

using kernels::ChannelsLast;
using kernels::check_bn;
using kernels::check_bn_like_x;

// Per-channel sums in double over 8 lanes (core/cpu/lanes.h: element j of a row goes to lane
// j % 8, each row's last s % 8 elements to a ninth, scalar sum), combined in a fixed order, so the
// per-ISA copies (simd_dispatch) add the same numbers in the same order and vectorize the channel
// loops, which with one double accumulator ran at one add per 4 cycles (batch norm was a fifth of
// a MobileNetV2 step). Plain loops, not lambdas: through a lambda GCC kept the lanes on the stack.
// The forward adds a residual and applies a following ReLU/ReLU6 in its output pass;
// batch_norm_act_grad is that activation's backward (without a residual), from the recomputed
// pre-activation (core/norm_act.h).

namespace {

// dout where act passes at y = x * scale + shift (the expression affine_rows rounds), else 0.
// Selected in T, and dout loaded whether it passes or not: a select of bf16 values, or a load on
// one side of it only, does not vectorize (the bf16 loops ran scalar, a fifth of a bf16
// MobileNetV2 step on AVX2).
template <NormActivation A, typename D, typename T>
OCTET_SIMD_INLINE D act_grad_value(D x, D dout, T scale, T shift) {
  const T g = static_cast<T>(dout);
  return static_cast<D>(norm_act_passes(A, pre_activation(x, scale, shift)) ? g : T(0));
}

// out rows = act_grad_value over one channel's n rows of s values, `stride` apart.
template <NormActivation A, typename D, typename T>
OCTET_SIMD_INLINE void act_grad_rows(const D* gc, const D* xc, D* oc, int64_t n, int64_t stride, int64_t s, T scale,
                                     T shift) {
  for (int64_t i = 0; i < n; ++i) {
    const D *row = xc + i * stride, *grow = gc + i * stride;
    D* orow = oc + i * stride;
    for (int64_t j = 0; j < s; ++j) orow[j] = act_grad_value<A>(row[j], grow[j], scale, shift);
  }
}

// ---------------------------------------------------------------- channels-last [N, S, C] memory
// (core/memory_format.h). The sums visit each channel's values in the order the NCHW loops above
// do (sample by sample, pixel by pixel) into the same nine accumulators (pixel j of a plane to lane
// j % 8, the last s % 8 pixels to the tail), now held per channel side by side, so a channel gets
// the NCHW kernels' bits while the loops run along C in vectors. The sums split channels across
// threads; the elementwise passes split pixels.

// Channels per parallel chunk of the sums: a whole number of 64-byte lines of f32 values.
constexpr int64_t kClChannelGrain = 16;
// Pixels per parallel chunk of the elementwise passes: about 16K values.
int64_t cl_pixel_grain(int64_t c) { return std::max<int64_t>(1, 16384 / c); }

// row.template operator()<A>(p, scale, shift) for every pixel p of [N, S, C] memory, pixels split
// across threads: the pass along C after the statistics, with the forward affine's per-channel
// scale and shift (bn_affine) and the activation A picked once.
template <typename T, typename Row>
void cl_activated_pixels(const T* pm, const T* pi, const T* pw, const T* pb, int64_t n, int64_t s, int64_t c,
                         NormActivation act, Row row) {
  std::vector<T> scale(c), shift(c);
  for (int64_t ch = 0; ch < c; ++ch) bn_affine(pm[ch], pi[ch], pw, pb, ch, scale[ch], shift[ch]);
  const T *ps = scale.data(), *pt = shift.data();
  parallel_for(0, n * s, cl_pixel_grain(c), [&](int64_t p0, int64_t p1) {
    simd_dispatch([=] {
      with_norm_act(act, [&]<NormActivation A>() {
        for (int64_t p = p0; p < p1; ++p) row.template operator()<A>(p, ps, pt);
      });
    });
  });
}

// f(acc + l * w, offset of channel c0 at the pixel) for every pixel of x ([N, S, C] memory) in
// order, l the pixel's lane: f adds the pixel's values of channels [c0, c0 + w) into that lane.
template <typename D, typename F>
OCTET_SIMD_INLINE void cl_lane_sums(const D* x, int64_t n, int64_t s, int64_t c, int64_t c0, int64_t w, double* acc,
                                    F f) {
  const int64_t s8 = s / 8 * 8;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < s; ++j) {
      const int64_t pixel = (i * s + j) * c + c0;
      double* a = acc + (j < s8 ? j % 8 : 8) * w;
      f(a, pixel);
    }
  }
}

// The nine accumulators of channel k combined as bn_channel_stats combines them.
OCTET_SIMD_INLINE double cl_lane_total(const double* acc, int64_t w, int64_t k) {
  const double* l = acc + k;
  return (((l[0] + l[w]) + (l[2 * w] + l[3 * w])) + ((l[4 * w] + l[5 * w]) + (l[6 * w] + l[7 * w]))) + l[8 * w];
}

template <typename D, typename T>
void cl_forward(const D* px, const T* pw, const T* pb, const D* pr, D* po, T* pm, T* pi, int64_t n, int64_t s,
                int64_t c, double eps, NormActivation act) {
  const double count = static_cast<double>(n * s);
  parallel_for(0, c, kClChannelGrain, [&](int64_t c0, int64_t c1) {
    const int64_t w = c1 - c0;
    std::vector<double> acc_v(9 * w), mu_v(w);
    double *acc = acc_v.data(), *mu = mu_v.data();
    simd_dispatch([=] {
      std::fill(acc, acc + 9 * w, 0.0);
      cl_lane_sums(px, n, s, c, c0, w, acc, [&](double* a, int64_t at) {
        for (int64_t k = 0; k < w; ++k) a[k] += static_cast<T>(px[at + k]);
      });
      for (int64_t k = 0; k < w; ++k) mu[k] = cl_lane_total(acc, w, k) / count;
      std::fill(acc, acc + 9 * w, 0.0);
      cl_lane_sums(px, n, s, c, c0, w, acc, [&](double* a, int64_t at) {
        for (int64_t k = 0; k < w; ++k) {
          const double d = static_cast<T>(px[at + k]) - mu[k];
          a[k] += d * d;
        }
      });
      for (int64_t k = 0; k < w; ++k) {
        pm[c0 + k] = static_cast<T>(mu[k]);
        pi[c0 + k] = static_cast<T>(1.0 / std::sqrt(cl_lane_total(acc, w, k) / count + eps));
      }
    });
  });
  cl_activated_pixels(pm, pi, pw, pb, n, s, c, act, [=]<NormActivation A>(int64_t p, const T* ps, const T* pt) {
    const D* xr = px + p * c;
    D* orow = po + p * c;
    if (pr != nullptr) {
      const D* rr = pr + p * c;
      for (int64_t k = 0; k < c; ++k)
        orow[k] = static_cast<D>(norm_act_apply(A, pre_activation(xr[k], ps[k], pt[k]) + static_cast<T>(rr[k])));
    } else {
      for (int64_t k = 0; k < c; ++k) orow[k] = static_cast<D>(norm_act_apply(A, static_cast<T>(xr[k]) * ps[k] + pt[k]));
    }
  });
}

template <typename D, typename T>
void cl_backward(const D* px, const D* pg, const T* pm, const T* pi, const T* pw, D* pdx, T* pdw, T* pdb, int64_t n,
                 int64_t s, int64_t c) {
  const double count = static_cast<double>(n * s);
  // Per channel: a, b, k, m of dx = a * (dout - b - (x - m) * k), as the NCHW loop rounds them.
  std::vector<T> coef(pdx != nullptr ? 4 * c : 0);
  T* pc = coef.data();
  parallel_for(0, c, kClChannelGrain, [&](int64_t c0, int64_t c1) {
    const int64_t w = c1 - c0;
    std::vector<double> acc_v(18 * w);
    double* acc = acc_v.data();
    simd_dispatch([=] {
      std::fill(acc, acc + 18 * w, 0.0);
      double* acc_gx = acc + 9 * w;
      cl_lane_sums(px, n, s, c, c0, w, acc, [&](double* a, int64_t at) {
        double* b = a + 9 * w;
        for (int64_t k = 0; k < w; ++k) {
          const double g = static_cast<T>(pg[at + k]);
          a[k] += g;
          b[k] += g * (static_cast<double>(static_cast<T>(px[at + k])) - static_cast<double>(pm[c0 + k]));
        }
      });
      for (int64_t k = 0; k < w; ++k) {
        const int64_t ch = c0 + k;
        const double inv = pi[ch];
        const double sg = cl_lane_total(acc, w, k), sgx = cl_lane_total(acc_gx, w, k) * inv;
        if (pdw) pdw[ch] = static_cast<T>(sgx);
        if (pdb) pdb[ch] = static_cast<T>(sg);
        if (!pc) continue;
        const double wt = pw ? static_cast<double>(pw[ch]) : 1.0;
        pc[ch] = static_cast<T>(wt * inv);
        pc[c + ch] = static_cast<T>(sg / count);
        pc[2 * c + ch] = static_cast<T>(sgx / count * inv);
        pc[3 * c + ch] = pm[ch];
      }
    });
  });
  if (pdx == nullptr) return;
  parallel_for(0, n * s, cl_pixel_grain(c), [&](int64_t p0, int64_t p1) {
    simd_dispatch([=] {
      const T *a = pc, *b = pc + c, *k = pc + 2 * c, *m = pc + 3 * c;
      for (int64_t p = p0; p < p1; ++p) {
        const D *xr = px + p * c, *gr = pg + p * c;
        D* dr = pdx + p * c;
        for (int64_t ch = 0; ch < c; ++ch)
          dr[ch] = static_cast<D>(a[ch] * (static_cast<T>(gr[ch]) - b[ch] - (static_cast<T>(xr[ch]) - m[ch]) * k[ch]));
      }
    });
  });
}

template <typename D, typename T>
void cl_act_grad(const D* px, const D* pg, const T* pm, const T* pi, const T* pw, const T* pb, D* po, int64_t n,
                 int64_t s, int64_t c, NormActivation act) {
  cl_activated_pixels(pm, pi, pw, pb, n, s, c, act, [=]<NormActivation A>(int64_t p, const T* ps, const T* pt) {
    const D *xr = px + p * c, *gr = pg + p * c;
    D* orow = po + p * c;
    for (int64_t k = 0; k < c; ++k) orow[k] = act_grad_value<A>(xr[k], gr[k], ps[k], pt[k]);
  });
}
}  // namespace

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& residual) {
  check_cpu("batch_norm", {x, weight, bias, out, mean, invstd, residual});
  check_bn("batch_norm", x, {weight, bias, mean, invstd}, ChannelsLast::yes);
  check_bn_like_x("batch_norm", x, {out, residual});
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  if (!x.is_contiguous()) {
    return dispatch_activation(x.dtype(), "batch_norm", [&]<typename D>() {
      using T = opmath_t<D>;
      cl_forward<D, T>(x.data<D>(), data_or_null<T>(weight), data_or_null<T>(bias), data_or_null<D>(residual),
                       out.data<D>(), mean.data<T>(), invstd.data<T>(), n, s, c, eps, act);
    });
  }
  dispatch_activation(x.dtype(), "batch_norm", [&]<typename D>() {
    using T = opmath_t<D>;
    const D* px = x.data<D>();
    D* po = out.data<D>();
    T* pm = mean.data<T>();
    T* pi = invstd.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    const D* pr = data_or_null<D>(residual);
    parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      simd_dispatch([=] {
        for (int64_t ch = begin; ch < end; ++ch) {
          const D* xc = px + ch * s;
          bn_channel_stats(xc, n, c * s, s, eps, pm[ch], pi[ch]);
          T scale, shift;
          bn_affine(pm[ch], pi[ch], pw, pb, ch, scale, shift);
          const D* rc = pr != nullptr ? pr + ch * s : nullptr;
          D* oc = po + ch * s;
          affine_act_channel(act, xc, rc, oc, n, c * s, c * s, s, scale, shift);
        }
      });
    });
  });
}

void batch_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  check_cpu("batch_norm_backward", {dout, x, weight, mean, invstd, dx, dweight, dbias});
  check_bn("batch_norm_backward", x, {weight, mean, invstd, dweight, dbias}, ChannelsLast::yes);
  check_bn_like_x("batch_norm_backward", x, {dout, dx});
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  if (!x.is_contiguous()) {
    return dispatch_activation(x.dtype(), "batch_norm_backward", [&]<typename D>() {
      using T = opmath_t<D>;
      cl_backward<D, T>(x.data<D>(), dout.data<D>(), mean.data<T>(), invstd.data<T>(), data_or_null<T>(weight),
                        data_or_null<D>(dx), data_or_null<T>(dweight), data_or_null<T>(dbias), n, s, c);
    });
  }
  dispatch_activation(x.dtype(), "batch_norm_backward", [&]<typename D>() {
    using T = opmath_t<D>;
    const D* px = x.data<D>();
    const D* pg = dout.data<D>();
    const T* pm = mean.data<T>();
    const T* pi = invstd.data<T>();
    const T* pw = data_or_null<T>(weight);
    D* pdx = data_or_null<D>(dx);
    T* pdw = data_or_null<T>(dweight);
    T* pdb = data_or_null<T>(dbias);
    const double count = static_cast<double>(n * s);
    parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      simd_dispatch([=] {
        for (int64_t ch = begin; ch < end; ++ch) {
          const double mu = pm[ch], inv = pi[ch];
          const D *xc = px + ch * s, *gc = pg + ch * s;
          const int64_t s8 = s / 8 * 8;
          Lanes8 sum_g, sum_gx;  // sum(dout), sum(dout * (x - mu))
          double g_tail = 0, gx_tail = 0;
          for (int64_t i = 0; i < n; ++i) {
            const D *row = xc + i * c * s, *grow = gc + i * c * s;
            for (int64_t j = 0; j < s8; j += 8) {
              const Lanes8 g = Lanes8::load(grow + j);
              sum_g += g;
              sum_gx += g * (Lanes8::load(row + j) - mu);
            }
            for (int64_t j = s8; j < s; ++j) {
              const double g = static_cast<T>(grow[j]);
              g_tail += g;
              gx_tail += g * (static_cast<T>(row[j]) - mu);
            }
          }
          const double sg = sum_g.pairwise_total() + g_tail,
                       sgx = (sum_gx.pairwise_total() + gx_tail) * inv;  // sum(dout * xhat)
          if (pdw) pdw[ch] = static_cast<T>(sgx);
          if (pdb) pdb[ch] = static_cast<T>(sg);
          if (!pdx) continue;
          // dx = w * inv * (dout - mean(dout) - xhat * mean(dout * xhat))
          const double w = pw ? static_cast<double>(pw[ch]) : 1.0;
          const T a = static_cast<T>(w * inv);
          const T b = static_cast<T>(sg / count);
          const T k = static_cast<T>(sgx / count * inv);  // times (x - mu) gives xhat * mean(dout*xhat)
          const T m = static_cast<T>(mu);
          for (int64_t i = 0; i < n; ++i) {
            const D* row = xc + i * c * s;
            const D* grow = gc + i * c * s;
            D* drow = pdx + (i * c + ch) * s;
            for (int64_t j = 0; j < s; ++j)
              drow[j] = static_cast<D>(a * (static_cast<T>(grow[j]) - b - (static_cast<T>(row[j]) - m) * k));
          }
        }
      });
    });
  });
}

void batch_norm_act_grad(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& out) {
  check_cpu("batch_norm_act_grad", {dout, x, weight, bias, mean, invstd, out});
  check_bn("batch_norm_act_grad", x, {weight, bias, mean, invstd}, ChannelsLast::yes);
  OCTET_CHECK(dout.defined() && out.defined(), "batch_norm_act_grad: dout and out must be defined");
  check_bn_like_x("batch_norm_act_grad", x, {dout, out});
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  if (!x.is_contiguous()) {
    return dispatch_activation(x.dtype(), "batch_norm_act_grad", [&]<typename D>() {
      using T = opmath_t<D>;
      cl_act_grad<D, T>(x.data<D>(), dout.data<D>(), mean.data<T>(), invstd.data<T>(), data_or_null<T>(weight),
                        data_or_null<T>(bias), out.data<D>(), n, s, c, act);
    });
  }
  dispatch_activation(x.dtype(), "batch_norm_act_grad", [&]<typename D>() {
    using T = opmath_t<D>;
    const D* px = x.data<D>();
    const D* pg = dout.data<D>();
    const T* pm = mean.data<T>();
    const T* pi = invstd.data<T>();
    const T* pw = data_or_null<T>(weight);
    const T* pb = data_or_null<T>(bias);
    D* po = out.data<D>();
    parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      simd_dispatch([=] {
        for (int64_t ch = begin; ch < end; ++ch) {
          T scale, shift;
          bn_affine(pm[ch], pi[ch], pw, pb, ch, scale, shift);
          const D *xc = px + ch * s, *gc = pg + ch * s;
          D* oc = po + ch * s;
          with_norm_act(act, [&]<NormActivation A>() { act_grad_rows<A>(gc, xc, oc, n, c * s, s, scale, shift); });
        }
      });
    });
  });
}

// ---------------------------------------------------------------- layer norm
// One pass for each row's statistics (double sums over 8 lanes, core/cpu/lanes.h, so every ISA
// adds the same numbers in the same order), one for the output; the backward's row sums the same
// way, and the parameter gradients as column sums in row order, split across threads by columns.

namespace {

// Rows per parallel chunk: about 16K values.
int64_t ln_row_grain(int64_t n) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)); }

// sum(f(j)) for j in [0, n), f giving 8 lanes from index j (a multiple of 8) and a value for the tail.
template <typename F8, typename F1>
OCTET_SIMD_INLINE double lane_sum(int64_t n, F8 f8, F1 f1) {
  const int64_t n8 = n / 8 * 8;
  Lanes8 acc;
  double tail = 0;
  for (int64_t j = 0; j < n8; j += 8) acc += f8(j);
  for (int64_t j = n8; j < n; ++j) tail += f1(j);
  return acc.pairwise_total() + tail;
}

template <typename D, typename T>
void ln_forward(const D* px, const T* pw, const T* pb, double eps, D* po, T* pm, T* pr, int64_t m, int64_t n) {
  parallel_for(0, m, ln_row_grain(n), [&](int64_t r0, int64_t r1) {
    simd_dispatch([=] {
      for (int64_t r = r0; r < r1; ++r) {
        const D* x = px + r * n;
        D* o = po + r * n;
        const double mu =
            lane_sum(n, [&](int64_t j) { return Lanes8::load(x + j); },
                     [&](int64_t j) { return static_cast<double>(static_cast<T>(x[j])); }) /
            static_cast<double>(n);
        const double var = lane_sum(
                               n,
                               [&](int64_t j) {
                                 const Lanes8 d = Lanes8::load(x + j) - mu;
                                 return d * d;
                               },
                               [&](int64_t j) {
                                 const double d = static_cast<T>(x[j]) - mu;
                                 return d * d;
                               }) /
                           static_cast<double>(n);
        const T mean = static_cast<T>(mu), rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
        pm[r] = mean, pr[r] = rstd;
        if (pw != nullptr && pb != nullptr) {
          for (int64_t j = 0; j < n; ++j) o[j] = static_cast<D>((static_cast<T>(x[j]) - mean) * rstd * pw[j] + pb[j]);
        } else if (pw != nullptr) {
          for (int64_t j = 0; j < n; ++j) o[j] = static_cast<D>((static_cast<T>(x[j]) - mean) * rstd * pw[j]);
        } else if (pb != nullptr) {
          for (int64_t j = 0; j < n; ++j) o[j] = static_cast<D>((static_cast<T>(x[j]) - mean) * rstd + pb[j]);
        } else {
          for (int64_t j = 0; j < n; ++j) o[j] = static_cast<D>((static_cast<T>(x[j]) - mean) * rstd);
        }
      }
    });
  });
}

// dx = rstd * (g w - mean(g w) - xhat * mean(g w xhat)) per row; dweight = sum over rows of
// g * xhat, dbias = sum of g, per column.
template <typename D, typename T>
void ln_backward(const D* pg, const D* px, const T* pw, const T* pm, const T* pr, D* pdx, T* pdw, T* pdb, int64_t m,
                 int64_t n) {
  if (pdx != nullptr) {
    parallel_for(0, m, ln_row_grain(n), [&](int64_t r0, int64_t r1) {
      std::vector<T> wg_v(static_cast<size_t>(n)), xh_v(static_cast<size_t>(n));
      T *wg = wg_v.data(), *xh = xh_v.data();
      simd_dispatch([=] {
        for (int64_t r = r0; r < r1; ++r) {
          const D *g = pg + r * n, *x = px + r * n;
          D* dx = pdx + r * n;
          const T mean = pm[r], rstd = pr[r];
          for (int64_t j = 0; j < n; ++j) {
            xh[j] = (static_cast<T>(x[j]) - mean) * rstd;
            wg[j] = pw != nullptr ? static_cast<T>(g[j]) * pw[j] : static_cast<T>(g[j]);
          }
          const double a = lane_sum(
              n, [&](int64_t j) { return Lanes8::load(wg + j); }, [&](int64_t j) { return double(wg[j]); });
          const double b = lane_sum(
              n, [&](int64_t j) { return Lanes8::load(wg + j) * Lanes8::load(xh + j); },
              [&](int64_t j) { return double(wg[j]) * double(xh[j]); });
          const T ma = static_cast<T>(a / static_cast<double>(n)), mb = static_cast<T>(b / static_cast<double>(n));
          for (int64_t j = 0; j < n; ++j) dx[j] = static_cast<D>(rstd * (wg[j] - ma - xh[j] * mb));
        }
      });
    });
  }
  if (pdw == nullptr && pdb == nullptr) return;
  constexpr int64_t kColumns = 64;
  parallel_for(0, n, kColumns, [&](int64_t c0, int64_t c1) {
    const int64_t w = c1 - c0;
    std::vector<double> sw_v(static_cast<size_t>(w), 0.0), sb_v(static_cast<size_t>(w), 0.0);
    double *sw = sw_v.data(), *sb = sb_v.data();
    simd_dispatch([=] {
      for (int64_t r = 0; r < m; ++r) {
        const D *g = pg + r * n + c0, *x = px + r * n + c0;
        const T mean = pm[r], rstd = pr[r];
        for (int64_t k = 0; k < w; ++k) {
          const double gk = static_cast<T>(g[k]);
          sb[k] += gk;
          sw[k] += gk * static_cast<double>((static_cast<T>(x[k]) - mean) * rstd);
        }
      }
      for (int64_t k = 0; k < w; ++k) {
        if (pdw != nullptr) pdw[c0 + k] = static_cast<T>(sw[k]);
        if (pdb != nullptr) pdb[c0 + k] = static_cast<T>(sb[k]);
      }
    });
  });
}

void check_ln(const char* op, const Tensor& x, std::initializer_list<Tensor> like_x,
              std::initializer_list<Tensor> per_column, std::initializer_list<Tensor> per_row) {
  OCTET_CHECK(x.dim() == 2 && x.is_contiguous(), op, ": kernel requires a contiguous [M, N] input, got ", x.shape());
  const DType t = opmath_dtype(x.dtype());
  for (const Tensor& v : like_x)
    OCTET_CHECK(!v.defined() || (v.shape() == x.shape() && v.is_contiguous() && v.dtype() == x.dtype()), op,
                ": expected a contiguous ", x.dtype(), " ", x.shape());
  for (const Tensor& v : per_column)
    OCTET_CHECK(!v.defined() || (v.numel() == x.size(1) && v.is_contiguous() && v.dtype() == t), op,
                ": per-column tensors must be contiguous ", t, " [", x.size(1), "]");
  for (const Tensor& v : per_row)
    OCTET_CHECK(v.numel() == x.size(0) && v.is_contiguous() && v.dtype() == t, op, ": per-row tensors must be contiguous ",
                t, " [", x.size(0), "]");
}

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& rstd) {
  check_cpu("layer_norm", {x, weight, bias, out, mean, rstd});
  check_ln("layer_norm", x, {out}, {weight, bias}, {mean, rstd});
  OCTET_CHECK(out.defined(), "layer_norm: undefined output");
  dispatch_activation(x.dtype(), "layer_norm", [&]<typename D>() {
    using T = opmath_t<D>;
    ln_forward<D, T>(x.data<D>(), data_or_null<T>(weight), data_or_null<T>(bias), eps, out.data<D>(), mean.data<T>(),
                     rstd.data<T>(), x.size(0), x.size(1));
  });
}

void layer_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  check_cpu("layer_norm_backward", {dout, x, weight, mean, rstd, dx, dweight, dbias});
  check_ln("layer_norm_backward", x, {dout, dx}, {weight, dweight, dbias}, {mean, rstd});
  OCTET_CHECK(dout.defined(), "layer_norm_backward: undefined dout");
  dispatch_activation(x.dtype(), "layer_norm_backward", [&]<typename D>() {
    using T = opmath_t<D>;
    ln_backward<D, T>(dout.data<D>(), x.data<D>(), data_or_null<T>(weight), mean.data<T>(), rstd.data<T>(),
                      data_or_null<D>(dx), data_or_null<T>(dweight), data_or_null<T>(dbias), x.size(0), x.size(1));
  });
}

}  // namespace octet::cpu
