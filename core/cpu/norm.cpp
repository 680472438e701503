// CPU batch norm (training mode): one kernel for the statistics and the normalization, one for the
// whole backward, instead of the ~10 elementwise passes the composite formula makes. Each channel
// is reduced by one thread in a fixed order (deterministic); sums accumulate in f64, in 8 lanes.
#include <cmath>

#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"
#include "core/cpu/norm_stats.h"
#include "core/kernel_checks.h"

namespace octet::cpu {

using kernels::check_bn;
using kernels::check_bn_residual;

// Per-channel sums in double over 8 lanes (core/cpu/lanes.h: element j of a row goes to lane
// j % 8, each row's last s % 8 elements to a ninth, scalar sum), combined in a fixed order, so the
// per-ISA copies (simd_dispatch) add the same numbers in the same order and vectorize the channel
// loops, which with one double accumulator ran at one add per 4 cycles (batch norm was a fifth of
// a MobileNetV2 step). Plain loops, not lambdas: through a lambda GCC kept the lanes on the stack.
// The forward adds a residual and applies a following ReLU/ReLU6 in its output pass;
// batch_norm_act_grad is that activation's backward (without a residual), from the recomputed
// pre-activation (core/norm_act.h).

namespace {

// out rows = dout where act passes at y = x * scale + shift (the expression affine_rows rounds).
template <NormActivation A, typename T>
OCTET_SIMD_INLINE void act_grad_rows(const T* gc, const T* xc, T* oc, int64_t n, int64_t stride, int64_t s, T scale,
                                     T shift) {
  for (int64_t i = 0; i < n; ++i) {
    const T *row = xc + i * stride, *grow = gc + i * stride;
    T* orow = oc + i * stride;
    for (int64_t j = 0; j < s; ++j) orow[j] = norm_act_passes(A, row[j] * scale + shift) ? grow[j] : T(0);
  }
}

}  // namespace

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& residual) {
  check_cpu("batch_norm", {x, weight, bias, out, mean, invstd, residual});
  check_bn("batch_norm", x, {weight, bias, mean, invstd});
  check_bn_residual("batch_norm", x, residual);
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  dispatch_float(x.dtype(), "batch_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    T* pm = mean.data<T>();
    T* pi = invstd.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    const T* pr = residual.defined() ? residual.data<T>() : nullptr;
    parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      simd_dispatch([=] {
        for (int64_t ch = begin; ch < end; ++ch) {
          const T* xc = px + ch * s;
          bn_channel_stats(xc, n, c * s, s, eps, pm[ch], pi[ch]);
          T scale, shift;
          bn_affine(pm[ch], pi[ch], pw, pb, ch, scale, shift);
          const T* rc = pr != nullptr ? pr + ch * s : nullptr;
          T* oc = po + ch * s;
          affine_act_channel(act, xc, rc, oc, n, c * s, c * s, s, scale, shift);
        }
      });
    });
  });
}

void batch_norm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& invstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  check_cpu("batch_norm_backward", {dout, x, weight, mean, invstd, dx, dweight, dbias});
  check_bn("batch_norm_backward", x, {weight, mean, invstd, dweight, dbias});
  OCTET_CHECK(dout.shape() == x.shape() && dout.is_contiguous() && (!dx.defined() || dx.is_contiguous()),
              "batch_norm_backward: dout and dx must be contiguous ", x.shape());
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  dispatch_float(x.dtype(), "batch_norm_backward", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pg = dout.data<T>();
    const T* pm = mean.data<T>();
    const T* pi = invstd.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    T* pdx = dx.defined() ? dx.data<T>() : nullptr;
    T* pdw = dweight.defined() ? dweight.data<T>() : nullptr;
    T* pdb = dbias.defined() ? dbias.data<T>() : nullptr;
    const double count = static_cast<double>(n * s);
    parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      simd_dispatch([=] {
        for (int64_t ch = begin; ch < end; ++ch) {
          const double mu = pm[ch], inv = pi[ch];
          const T *xc = px + ch * s, *gc = pg + ch * s;
          const int64_t s8 = s / 8 * 8;
          Lanes8 sum_g, sum_gx;  // sum(dout), sum(dout * (x - mu))
          double g_tail = 0, gx_tail = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T *row = xc + i * c * s, *grow = gc + i * c * s;
            for (int64_t j = 0; j < s8; j += 8) {
              const Lanes8 g = Lanes8::load(grow + j);
              sum_g += g;
              sum_gx += g * (Lanes8::load(row + j) - mu);
            }
            for (int64_t j = s8; j < s; ++j) {
              g_tail += grow[j];
              gx_tail += grow[j] * (row[j] - mu);
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
            const T* row = xc + i * c * s;
            const T* grow = gc + i * c * s;
            T* drow = pdx + (i * c + ch) * s;
            for (int64_t j = 0; j < s; ++j) drow[j] = a * (grow[j] - b - (row[j] - m) * k);
          }
        }
      });
    });
  });
}

void batch_norm_act_grad(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& mean, const Tensor& invstd, NormActivation act, const Tensor& out) {
  check_cpu("batch_norm_act_grad", {dout, x, weight, bias, mean, invstd, out});
  check_bn("batch_norm_act_grad", x, {weight, bias, mean, invstd});
  OCTET_CHECK(dout.shape() == x.shape() && out.shape() == x.shape() && dout.dtype() == x.dtype() &&
                  out.dtype() == x.dtype() && dout.is_contiguous() && out.is_contiguous(),
              "batch_norm_act_grad: dout and out must be contiguous ", x.dtype(), " ", x.shape());
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  dispatch_float(x.dtype(), "batch_norm_act_grad", [&]<typename T>() {
    const T* px = x.data<T>();
    const T* pg = dout.data<T>();
    const T* pm = mean.data<T>();
    const T* pi = invstd.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    T* po = out.data<T>();
    parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      simd_dispatch([=] {
        for (int64_t ch = begin; ch < end; ++ch) {
          T scale, shift;
          bn_affine(pm[ch], pi[ch], pw, pb, ch, scale, shift);
          const T *xc = px + ch * s, *gc = pg + ch * s;
          T* oc = po + ch * s;
          switch (act) {
            case NormActivation::none:
              act_grad_rows<NormActivation::none>(gc, xc, oc, n, c * s, s, scale, shift);
              break;
            case NormActivation::relu:
              act_grad_rows<NormActivation::relu>(gc, xc, oc, n, c * s, s, scale, shift);
              break;
            case NormActivation::relu6:
              act_grad_rows<NormActivation::relu6>(gc, xc, oc, n, c * s, s, scale, shift);
              break;
          }
        }
      });
    });
  });
}

}  // namespace octet::cpu
