// CPU batch norm (training mode): one kernel for the statistics and the normalization, one for the
// whole backward, instead of the ~10 elementwise passes the composite formula makes. Each channel
// is reduced by one thread in a fixed order (deterministic); sums accumulate in f64, in 8 lanes.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/kernel_checks.h"

namespace octet::cpu {

using kernels::check_bn;

namespace {

// Per-channel sums in double over 8 lanes (element j of a row goes to lane j % 8, each row's last
// s % 8 elements to a ninth, scalar sum), combined in a fixed order: GCC vector types, so the
// per-ISA copies (simd_dispatch) add the same numbers in the same order and vectorize the channel
// loops, which with one double accumulator ran at one add per 4 cycles (batch norm was a fifth of
// a MobileNetV2 step). Plain loops, not lambdas: through a lambda GCC kept the lanes on the stack.
#pragma GCC diagnostic ignored "-Wpsabi"  // the vector helpers are internal and always inlined
using V4d = double __attribute__((vector_size(32)));
using V4f = float __attribute__((vector_size(16)));

// 8 lanes of double as two 4-lane halves: whole ymm registers on AVX2 (a 64-byte vector type
// made GCC keep the halves on the stack).
struct Lanes {
  V4d lo = {}, hi = {};
  OCTET_SIMD_INLINE Lanes operator+(double v) const { return {lo + v, hi + v}; }
  OCTET_SIMD_INLINE Lanes operator-(double v) const { return {lo - v, hi - v}; }
  OCTET_SIMD_INLINE Lanes operator*(const Lanes& o) const { return {lo * o.lo, hi * o.hi}; }
  OCTET_SIMD_INLINE Lanes& operator+=(const Lanes& o) {
    lo += o.lo, hi += o.hi;
    return *this;
  }
  OCTET_SIMD_INLINE double total() const { return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3])); }
};

template <typename T>
OCTET_SIMD_INLINE V4d load4(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    V4f v;
    std::memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, V4d);
  } else {
    V4d v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
}

template <typename T>
OCTET_SIMD_INLINE Lanes load8(const T* p) {
  return {load4(p), load4(p + 4)};
}

}  // namespace

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
      simd_dispatch([=] {
        for (int64_t ch = begin; ch < end; ++ch) {
          const T* xc = px + ch * s;
          const int64_t s8 = s / 8 * 8;
          Lanes sum;
          double sum_tail = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T* row = xc + i * c * s;
            for (int64_t j = 0; j < s8; j += 8) sum += load8(row + j);
            for (int64_t j = s8; j < s; ++j) sum_tail += row[j];
          }
          const double mu = (sum.total() + sum_tail) / count;
          Lanes sq;  // two passes: no cancellation for large means
          double sq_tail = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T* row = xc + i * c * s;
            for (int64_t j = 0; j < s8; j += 8) {
              const Lanes d = load8(row + j) - mu;
              sq += d * d;
            }
            for (int64_t j = s8; j < s; ++j) sq_tail += (row[j] - mu) * (row[j] - mu);
          }
          const double inv = 1.0 / std::sqrt((sq.total() + sq_tail) / count + eps);
          pm[ch] = static_cast<T>(mu);
          pi[ch] = static_cast<T>(inv);
          const T scale = static_cast<T>(inv * (pw ? static_cast<double>(pw[ch]) : 1.0));
          const T shift = static_cast<T>((pb ? static_cast<double>(pb[ch]) : 0.0) - mu * static_cast<double>(scale));
          for (int64_t i = 0; i < n; ++i) {
            const T* row = xc + i * c * s;
            T* orow = po + (i * c + ch) * s;
            for (int64_t j = 0; j < s; ++j) orow[j] = row[j] * scale + shift;
          }
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
          Lanes sum_g, sum_gx;  // sum(dout), sum(dout * (x - mu))
          double g_tail = 0, gx_tail = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T *row = xc + i * c * s, *grow = gc + i * c * s;
            for (int64_t j = 0; j < s8; j += 8) {
              const Lanes g = load8(grow + j);
              sum_g += g;
              sum_gx += g * (load8(row + j) - mu);
            }
            for (int64_t j = s8; j < s; ++j) {
              g_tail += grow[j];
              gx_tail += grow[j] * (row[j] - mu);
            }
          }
          const double sg = sum_g.total() + g_tail, sgx = (sum_gx.total() + gx_tail) * inv;  // sum(dout * xhat)
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

}  // namespace octet::cpu
