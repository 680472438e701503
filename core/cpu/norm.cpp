// CPU batch norm (training mode): one kernel for the statistics and the normalization, one for the
// whole backward, instead of the ~10 elementwise passes the composite formula makes. Each channel
// is reduced by one thread in a fixed order (deterministic); sums accumulate in f64.
#include <cmath>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/kernel_checks.h"

namespace octet::cpu {

using kernels::check_bn;

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                        const Tensor& mean, const Tensor& invstd) {
  check_cpu("batch_norm", {x, weight, bias, out, mean, invstd});
  check_bn("batch_norm", x, {weight, bias, mean, invstd});
  const int64_t n = x.size(0), c = x.size(1), s = x.size(2);
  dispatch_float(x.dtype(), "batch_norm", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    T* pm = mean.data<T>();
    T* pi = invstd.data<T>();
    const T* pw = weight.defined() ? weight.data<T>() : nullptr;
    const T* pb = bias.defined() ? bias.data<T>() : nullptr;
    const double count = static_cast<double>(n * s);
    parallel_for(0, c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t ch = begin; ch < end; ++ch) {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          const T* row = px + (i * c + ch) * s;
          for (int64_t j = 0; j < s; ++j) sum += row[j];
        }
        const double mu = sum / count;
        double sq = 0;  // two passes: no cancellation for large means
        for (int64_t i = 0; i < n; ++i) {
          const T* row = px + (i * c + ch) * s;
          for (int64_t j = 0; j < s; ++j) {
            double d = row[j] - mu;
            sq += d * d;
          }
        }
        const double inv = 1.0 / std::sqrt(sq / count + eps);
        pm[ch] = static_cast<T>(mu);
        pi[ch] = static_cast<T>(inv);
        const T scale = static_cast<T>(inv * (pw ? static_cast<double>(pw[ch]) : 1.0));
        const T shift = static_cast<T>((pb ? static_cast<double>(pb[ch]) : 0.0) - mu * static_cast<double>(scale));
        for (int64_t i = 0; i < n; ++i) {
          const T* row = px + (i * c + ch) * s;
          T* orow = po + (i * c + ch) * s;
          for (int64_t j = 0; j < s; ++j) orow[j] = row[j] * scale + shift;
        }
      }
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
      for (int64_t ch = begin; ch < end; ++ch) {
        const double mu = pm[ch], inv = pi[ch];
        double sum_g = 0, sum_gx = 0;  // sum(dout), sum(dout * xhat)
        for (int64_t i = 0; i < n; ++i) {
          const T* row = px + (i * c + ch) * s;
          const T* grow = pg + (i * c + ch) * s;
          for (int64_t j = 0; j < s; ++j) {
            sum_g += grow[j];
            sum_gx += grow[j] * (row[j] - mu);
          }
        }
        sum_gx *= inv;
        if (pdw) pdw[ch] = static_cast<T>(sum_gx);
        if (pdb) pdb[ch] = static_cast<T>(sum_g);
        if (!pdx) continue;
        // dx = w * inv * (dout - mean(dout) - xhat * mean(dout * xhat))
        const double w = pw ? static_cast<double>(pw[ch]) : 1.0;
        const T a = static_cast<T>(w * inv);
        const T b = static_cast<T>(sum_g / count);
        const T k = static_cast<T>(sum_gx / count * inv);  // times (x - mu) gives xhat * mean(dout*xhat)
        const T m = static_cast<T>(mu);
        for (int64_t i = 0; i < n; ++i) {
          const T* row = px + (i * c + ch) * s;
          const T* grow = pg + (i * c + ch) * s;
          T* drow = pdx + (i * c + ch) * s;
          for (int64_t j = 0; j < s; ++j) drow[j] = a * (grow[j] - b - (row[j] - m) * k);
        }
      }
    });
  });
}

}  // namespace octet::cpu
