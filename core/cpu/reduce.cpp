// CPU row reductions and softmax. Rows are independent, so a row is always reduced by one
// thread in one order: results do not depend on the thread count.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/cpu/isa.h"
#ifdef OCTET_CPU_X86
#include <immintrin.h>
#endif
#include "core/cpu/kernels.h"
#include "core/cpu/lanes.h"
#include "core/cpu/loops.h"

namespace octet::cpu {

namespace {

// The constants of exp_nonpositive, shared with its AVX2 copy (the same bits need the same values).
constexpr float kExpLowest = -87.0f;
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
constexpr uint32_t kRoundBits = 0x4B400000u;
static_assert(std::bit_cast<uint32_t>(kRound) == kRoundBits);
constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
// Horner coefficients of the degree-7 Taylor polynomial, highest first.
constexpr float kExpPoly[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

// exp(x) for x <= 0 in float, within about 2 ulp (exp(x) for x < -87 is taken as exp(-87), 1.6e-38:
// in a softmax sum, whose largest term is 1, that is nothing). Cody-Waite reduction x = n ln2 + r,
// |r| <= ln2 / 2, a degree-7 Taylor polynomial (truncation 5e-9), and 2^n from the bits of the
// rounding constant: no float-to-int conversion, so NaN stays NaN without undefined behaviour.
// Plain IEEE float operations (the library is built without FMA contraction), which the AVX2 loop
// below repeats lane by lane: every ISA path gives the same bits.
inline float exp_nonpositive(float x) {
  x = x < kExpLowest ? kExpLowest : x;
  const float t = x * kLog2e + kRound;
  const float n = t - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float q = kExpPoly[0];
  for (int i = 1; i < 8; ++i) q = q * r + kExpPoly[i];
  uint32_t tb;
  std::memcpy(&tb, &t, sizeof tb);
  const uint32_t scale_bits = (tb - kRoundBits + 127u) << 23;  // 2^n, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return q * scale;
}

// log sum exp(p[j] - m) + m for a float row: the exps in float (exp_nonpositive), summed in double
// in 8 interleaved partial sums (Lanes8, core/cpu/lanes.h; the row's tail goes to lane 0) combined
// in Lanes8's fixed order. The AVX2 version computes the same lanes with the same IEEE operations
// (exp_nonpositive's, step by step) and adds them in the same order, so both give the same bits.
// They replace a libm double exp per element (GCC vectorizes neither that nor the portable loop):
// the 31k-vocabulary LM step went from 881 to 785 ms.
double row_logsumexp_f32_portable(const float* p, int64_t r, float m) {
  double acc[8] = {};
  int64_t j = 0;
  for (; j + 8 <= r; j += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(exp_nonpositive(p[j + k] - m));
  }
  for (; j < r; ++j) acc[0] += static_cast<double>(exp_nonpositive(p[j] - m));
  return static_cast<double>(m) + std::log(Lanes8::load(acc).pairwise_total());
}

#ifdef OCTET_CPU_X86
OCTET_TARGET_AVX2 inline __m256 mul_add(__m256 a, __m256 b, __m256 c) { return _mm256_add_ps(_mm256_mul_ps(a, b), c); }

// exp_nonpositive on 8 lanes, step by step the same IEEE operations.
OCTET_TARGET_AVX2 inline __m256 exp_nonpositive_avx2(__m256 x) {
  const __m256 round = _mm256_set1_ps(kRound);
  x = _mm256_max_ps(_mm256_set1_ps(kExpLowest), x);  // NaN stays x
  const __m256 t = mul_add(x, _mm256_set1_ps(kLog2e), round);
  const __m256 n = _mm256_sub_ps(t, round);
  const __m256 rr = _mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(kLn2Hi))),
                                  _mm256_mul_ps(n, _mm256_set1_ps(kLn2Lo)));
  __m256 q = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 8; ++i) q = mul_add(q, rr, _mm256_set1_ps(kExpPoly[i]));
  const __m256i scale = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(static_cast<int>(kRoundBits))),
                       _mm256_set1_epi32(127)),
      23);
  return _mm256_mul_ps(q, _mm256_castsi256_ps(scale));
}

// Adds the 8 lanes of v, in double, to the partial sums lo (lanes 0-3) and hi (4-7).
OCTET_TARGET_AVX2 inline void add_lanes(__m256 v, __m256d* lo, __m256d* hi) {
  *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

OCTET_TARGET_AVX2 double row_logsumexp_f32_avx2(const float* p, int64_t r, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 8 <= r; j += 8) add_lanes(exp_nonpositive_avx2(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm)), &lo, &hi);
  Lanes8 acc{lo, hi};
  for (; j < r; ++j) acc.lo[0] += static_cast<double>(exp_nonpositive(p[j] - m));
  return static_cast<double>(m) + std::log(acc.pairwise_total());
}
#endif

template <typename T>
double row_logsumexp(const T* p, int64_t r) {
  if constexpr (std::is_same_v<T, float>) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < r; ++j) m = std::max(m, p[j]);
    if (std::isinf(m)) return m;  // all -inf (or +inf present)
#ifdef OCTET_CPU_X86
    if (active_isa() != Isa::portable) return row_logsumexp_f32_avx2(p, r, m);  // AVX-512 machines have AVX2
#endif
    return row_logsumexp_f32_portable(p, r, m);
  }
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < r; ++j) m = std::max<double>(m, p[j]);
  if (std::isinf(m)) return m;  // all -inf (or +inf present)
  double s = 0;
  for (int64_t j = 0; j < r; ++j) s += std::exp(static_cast<double>(p[j]) - m);
  return m + std::log(s);
}

// ---- the gradients of log-softmax, softmax and cross-entropy, one row at a time

// exp of a log-probability (<= 0): exp_nonpositive in float, libm's exp in double.
template <typename T>
T exp_logp(T y) {
  if constexpr (std::is_same_v<T, float>)
    return exp_nonpositive(y);
  else
    return std::exp(y);
}

// sum of g (log) or of g * y (softmax, the products rounded to T) over a row, in double in 8
// interleaved partial sums combined in Lanes8's order (the tail in lane 0).
template <typename T>
double row_grad_sum_portable(bool log, const T* y, const T* g, int64_t r) {
  double acc[8] = {};
  auto term = [&](int64_t j) { return static_cast<double>(log ? g[j] : static_cast<T>(g[j] * y[j])); };
  int64_t j = 0;
  for (; j + 8 <= r; j += 8)
    for (int k = 0; k < 8; ++k) acc[k] += term(j + k);
  for (; j < r; ++j) acc[0] += term(j);
  return Lanes8::load(acc).pairwise_total();
}

// log: dx = g - exp(y) * s; softmax: dx = y * (g - s); s rounded to T.
template <typename T>
void softmax_backward_row_portable(bool log, const T* y, const T* g, T* dx, int64_t r) {
  const T s = static_cast<T>(row_grad_sum_portable(log, y, g, r));
  if (log)
    for (int64_t j = 0; j < r; ++j) dx[j] = g[j] - exp_logp(y[j]) * s;
  else
    for (int64_t j = 0; j < r; ++j) dx[j] = y[j] * (g[j] - s);
}

// dx = c * (exp(logp) - u), and at the target column t (if 0 <= t < r) c * ((exp(logp) - u) - w).
template <typename T>
void cross_entropy_backward_row_portable(const T* logp, int64_t t, T c, T u, T w, T* dx, int64_t r) {
  for (int64_t j = 0; j < r; ++j) dx[j] = c * (exp_logp(logp[j]) - u);
  if (t >= 0 && t < r) dx[t] = c * ((exp_logp(logp[t]) - u) - w);
}

#ifdef OCTET_CPU_X86
OCTET_TARGET_AVX2 void softmax_backward_row_avx2(bool log, const float* y, const float* g, float* dx, int64_t r) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 8 <= r; j += 8) {
    const __m256 gv = _mm256_loadu_ps(g + j);
    add_lanes(log ? gv : _mm256_mul_ps(gv, _mm256_loadu_ps(y + j)), &lo, &hi);
  }
  Lanes8 acc{lo, hi};
  for (; j < r; ++j) acc.lo[0] += static_cast<double>(log ? g[j] : g[j] * y[j]);
  const float s = static_cast<float>(acc.pairwise_total());
  const __m256 vs = _mm256_set1_ps(s);
  j = 0;
  if (log)
    for (; j + 8 <= r; j += 8)
      _mm256_storeu_ps(dx + j, _mm256_sub_ps(_mm256_loadu_ps(g + j),
                                             _mm256_mul_ps(exp_nonpositive_avx2(_mm256_loadu_ps(y + j)), vs)));
  else
    for (; j + 8 <= r; j += 8)
      _mm256_storeu_ps(dx + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), _mm256_sub_ps(_mm256_loadu_ps(g + j), vs)));
  for (; j < r; ++j) dx[j] = log ? g[j] - exp_nonpositive(y[j]) * s : y[j] * (g[j] - s);
}

OCTET_TARGET_AVX2 void cross_entropy_backward_row_avx2(const float* logp, int64_t t, float c, float u, float w,
                                                       float* dx, int64_t r) {
  const __m256 vc = _mm256_set1_ps(c), vu = _mm256_set1_ps(u);
  int64_t j = 0;
  for (; j + 8 <= r; j += 8)
    _mm256_storeu_ps(dx + j, _mm256_mul_ps(vc, _mm256_sub_ps(exp_nonpositive_avx2(_mm256_loadu_ps(logp + j)), vu)));
  for (; j < r; ++j) dx[j] = c * (exp_nonpositive(logp[j]) - u);
  if (t >= 0 && t < r) dx[t] = c * ((exp_nonpositive(logp[t]) - u) - w);
}
#endif

template <typename T>
void softmax_backward_row(bool log, const T* y, const T* g, T* dx, int64_t r) {
#ifdef OCTET_CPU_X86
  if constexpr (std::is_same_v<T, float>)
    if (active_isa() != Isa::portable) return softmax_backward_row_avx2(log, y, g, dx, r);
#endif
  softmax_backward_row_portable(log, y, g, dx, r);
}

template <typename T>
void cross_entropy_backward_row(const T* logp, int64_t t, T c, T u, T w, T* dx, int64_t r) {
#ifdef OCTET_CPU_X86
  if constexpr (std::is_same_v<T, float>)
    if (active_isa() != Isa::portable) return cross_entropy_backward_row_avx2(logp, t, c, u, w, dx, r);
#endif
  cross_entropy_backward_row_portable(logp, t, c, u, w, dx, r);
}

template <typename Fn>
void for_rows(const Tensor& x, const char* op, Fn fn) {
  OCTET_CHECK(x.dim() == 2 && x.is_contiguous(), op, ": kernel requires a contiguous [M, R] tensor");
  int64_t m = x.size(0), r = x.size(1);
  parallel_for(0, m, std::max<int64_t>(1, 16384 / std::max<int64_t>(r, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i, r);
  });
}

}  // namespace

void reduce_rows(ReduceOp op, const Tensor& x, const Tensor& out) {
  check_cpu("reduce", {x, out});
  OCTET_CHECK(x.size(1) > 0 || op == ReduceOp::sum || op == ReduceOp::sum_sq,
              "reduce: cannot take max/min/logsumexp over zero elements");
  dispatch_numeric(x.dtype(), "reduce", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_rows(x, "reduce", [&](int64_t i, int64_t r) {
      const T* p = px + i * r;
      if constexpr (std::is_floating_point_v<T>) {
        if (op == ReduceOp::logsumexp) {
          po[i] = static_cast<T>(row_logsumexp(p, r));
          return;
        }
      }
      if (op == ReduceOp::sum || op == ReduceOp::sum_sq) {
        using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
        A s = 0;
        if (op == ReduceOp::sum)
          for (int64_t j = 0; j < r; ++j) s += static_cast<A>(p[j]);
        else
          for (int64_t j = 0; j < r; ++j) s += static_cast<A>(p[j]) * static_cast<A>(p[j]);
        po[i] = static_cast<T>(s);
        return;
      }
      T m = p[0];
      bool is_max = op == ReduceOp::max;
      for (int64_t j = 1; j < r; ++j) {
        T v = p[j];
        if (v != v) {
          m = v;
          break;
        }  // NaN propagates
        if (is_max ? v > m : v < m) m = v;
      }
      po[i] = m;
    });
  });
}

void reduce_outer(ReduceOp op, const Tensor& x, int64_t a, int64_t k, int64_t b, const Tensor& out) {
  check_cpu("reduce", {x, out});
  OCTET_CHECK(op == ReduceOp::sum || op == ReduceOp::sum_sq, "reduce_outer: expected sum or sum_sq");
  OCTET_CHECK(x.is_contiguous() && out.is_contiguous() && x.numel() == a * k * b && out.numel() == k &&
                  out.dtype() == x.dtype(),
              "reduce_outer: expected contiguous x of ", a * k * b, " and out of ", k, " elements, got ", x.shape(),
              " and ", out.shape());
  const bool square = op == ReduceOp::sum_sq;
  dispatch_numeric(x.dtype(), "reduce", [&]<typename T>() {
    // The accumulator and the order of reduce_rows: each output's terms summed one by one, i outer.
    using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (b > 1) {  // rows of b contiguous terms: one output at a time
      parallel_for(0, k, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, a * b)), [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          A s = 0;
          for (int64_t i = 0; i < a; ++i) {
            const T* p = px + (i * k + j) * b;
            for (int64_t l = 0; l < b; ++l)
              s += square ? static_cast<A>(p[l]) * static_cast<A>(p[l]) : static_cast<A>(p[l]);
          }
          po[j] = static_cast<T>(s);
        }
      });
      return;
    }
    // b == 1: x is [a, k] and out its column sums: a block of columns accumulated together, row by
    // row (the adds of different columns vectorize; each column's stay in order).
    constexpr int64_t kCols = 256;
    parallel_for(0, (k + kCols - 1) / kCols, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t j0 = c * kCols, n = std::min(kCols, k - j0);
        A acc[kCols] = {};
        A* pa = acc;
        simd_dispatch([=] {
          for (int64_t i = 0; i < a; ++i) {
            const T* row = px + i * k + j0;
            if (square)
              for (int64_t j = 0; j < n; ++j) pa[j] += static_cast<A>(row[j]) * static_cast<A>(row[j]);
            else
              for (int64_t j = 0; j < n; ++j) pa[j] += static_cast<A>(row[j]);
          }
        });
        for (int64_t j = 0; j < n; ++j) po[j0 + j] = static_cast<T>(acc[j]);
      }
    });
  });
}

void arg_reduce_rows(bool is_max, const Tensor& x, const Tensor& out) {
  check_cpu("argmax", {x, out});
  dispatch_numeric(x.dtype(), "argmax", [&]<typename T>() {
    const T* px = x.data<T>();
    int64_t* po = out.data<int64_t>();
    for_rows(x, "argmax", [&](int64_t i, int64_t r) {
      const T* p = px + i * r;
      int64_t best = 0;
      for (int64_t j = 1; j < r; ++j) {
        if (p[best] != p[best]) break;  // first NaN wins
        if (p[j] != p[j] || (is_max ? p[j] > p[best] : p[j] < p[best])) best = j;
      }
      po[i] = best;
    });
  });
}

void softmax_rows(bool log, const Tensor& x, const Tensor& out) {
  check_cpu("softmax", {x, out});
  dispatch_float(x.dtype(), "softmax", [&]<typename T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_rows(x, "softmax", [&](int64_t i, int64_t r) {
      const T* p = px + i * r;
      T* o = po + i * r;
      double lse = row_logsumexp(p, r);
      if (log)
        for (int64_t j = 0; j < r; ++j) o[j] = static_cast<T>(static_cast<double>(p[j]) - lse);
      else
        for (int64_t j = 0; j < r; ++j) o[j] = static_cast<T>(std::exp(static_cast<double>(p[j]) - lse));
    });
  });
}

void softmax_backward_rows(bool log, const Tensor& y, const Tensor& g, const Tensor& dx) {
  check_cpu("softmax_backward", {y, g, dx});
  OCTET_CHECK(g.is_contiguous() && dx.is_contiguous() && g.shape() == y.shape() && dx.shape() == y.shape(),
              "softmax_backward: kernel requires contiguous [M, R] tensors of one shape");
  dispatch_float(y.dtype(), "softmax_backward", [&]<typename T>() {
    const T *py = y.data<T>(), *pg = g.data<T>();
    T* pd = dx.data<T>();
    for_rows(y, "softmax_backward",
             [&](int64_t i, int64_t r) { softmax_backward_row(log, py + i * r, pg + i * r, pd + i * r, r); });
  });
}

void cross_entropy_backward_rows(const Tensor& logp, const Tensor& target, const Tensor& coef, double smoothing,
                                 const Tensor& dx) {
  check_cpu("cross_entropy_backward", {logp, target, coef, dx});
  OCTET_CHECK(target.dtype() == DType::i64 && target.is_contiguous() && coef.is_contiguous() && dx.is_contiguous() &&
                  dx.shape() == logp.shape() && logp.dim() == 2 && target.numel() == logp.size(0) &&
                  coef.numel() == logp.size(0),
              "cross_entropy_backward: kernel requires logp and dx [M, R], target (i64) and coef [M], contiguous");
  dispatch_float(logp.dtype(), "cross_entropy_backward", [&]<typename T>() {
    const T *pl = logp.data<T>(), *pc = coef.data<T>();
    const int64_t* pt = target.data<int64_t>();
    T* pd = dx.data<T>();
    const int64_t classes = logp.size(1);
    const T u = static_cast<T>(smoothing / static_cast<double>(classes)), w = static_cast<T>(1.0 - smoothing);
    for_rows(logp, "cross_entropy_backward",
             [&](int64_t i, int64_t r) { cross_entropy_backward_row(pl + i * r, pt[i], pc[i], u, w, pd + i * r, r); });
  });
}

}  // namespace octet::cpu
