// The zero-point int8/uint8 GEMM and its Linear baseline (quant/qgemm.h): parameters, codes,
// fixed-point requantization, argument checks, then the device kernels through quant/kernels.h
// (quant/cpu/qgemm.h or quant/cuda/qgemm.h).
#include "quant/qgemm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/cpu/qgemm.h"
#include "quant/kernels.h"

namespace octet::quant {

namespace {

void check_type(QType t, const char* op) {
  OCTET_CHECK(t == QType::u8 || t == QType::s8, op, ": unknown QType ", static_cast<int>(t));
}

void check_params(const QParams& p, const char* op) {
  check_type(p.type, op);
  OCTET_CHECK(std::isfinite(p.scale) && p.scale > 0.0f, op, ": expected a finite scale > 0, got ", p.scale);
  OCTET_CHECK(p.zero_point >= qmin(p.type) && p.zero_point <= qmax(p.type), op, ": zero point ", p.zero_point,
              " outside the type's range [", qmin(p.type), ", ", qmax(p.type), "]");
}

void check_qgemm_args(const char* op, int64_t m, int64_t n, int64_t k, QType ta, const void* a, int64_t lda,
                      const int32_t* za, QType tb, const void* b, int64_t ldb, int32_t zb, const int32_t* c,
                      int64_t ldc) {
  check_type(ta, op);
  check_type(tb, op);
  OCTET_CHECK(m >= 0 && n >= 0 && k >= 0, op, ": expected nonnegative sizes, got m=", m, " n=", n, " k=", k);
  OCTET_CHECK(k <= kQGemmMaxK, op, ": k=", k, " too large: the int32 sums are only exact for k <= ", kQGemmMaxK);
  OCTET_CHECK(lda >= std::max<int64_t>(1, k) && ldb >= std::max<int64_t>(1, k) && ldc >= std::max<int64_t>(1, n), op,
              ": leading dimensions too small for m=", m, " n=", n, " k=", k, ": lda=", lda, " ldb=", ldb,
              " ldc=", ldc);
  if (m > 0 && n > 0) {
    OCTET_CHECK(c != nullptr && za != nullptr, op, ": null C or zero-point pointer");
    OCTET_CHECK(k == 0 || (a != nullptr && b != nullptr), op, ": null A or B pointer");
  }
  OCTET_CHECK(zb >= qmin(tb) && zb <= qmax(tb), op, ": B's zero point ", zb, " outside [", qmin(tb), ", ", qmax(tb),
              "]");
  for (int64_t i = 0; i < m && n > 0; ++i)
    OCTET_CHECK(za[i] >= qmin(ta) && za[i] <= qmax(ta), op, ": A's zero point ", za[i], " (row ", i, ") outside [",
                qmin(ta), ", ", qmax(ta), "]");
}

// gemmlowp's SaturatingRoundingDoublingHighMul: round(a * b / 2^31), halves up (the nudge), saturating
// the one overflow (INT32_MIN squared).
int32_t rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == std::numeric_limits<int32_t>::min() && b == a) return std::numeric_limits<int32_t>::max();
  const int64_t ab = static_cast<int64_t>(a) * b;
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30);
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));
}

// gemmlowp's RoundingDivideByPOT: x / 2^e rounded to nearest, ties away from zero; e >= 0.
int32_t rounding_shift_right(int32_t x, int e) {
  if (e == 0) return x;
  if (e > 31) return 0;  // |x| / 2^32 < 1/2
  const int64_t mask = (int64_t{1} << e) - 1;
  const int64_t remainder = static_cast<int64_t>(x) & mask;
  const int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return static_cast<int32_t>((static_cast<int64_t>(x) >> e) + (remainder > threshold ? 1 : 0));
}

// sum_t (x[t] - scale q[t])^2 in double, in 8 interleaved partial sums added in a fixed order
// (independent adds, not one serial chain); the same bits on every ISA (no reassociation or
// contraction).
double squared_error(const float* x, const int8_t* q, int64_t n, float scale) {
  return octet::cpu::simd_dispatch([=] {
    const auto s = static_cast<double>(scale);
    double lane[8] = {};
    int64_t t = 0;
    for (; t + 8 <= n; t += 8)
      for (int l = 0; l < 8; ++l) {
        const double d = static_cast<double>(x[t + l]) - s * q[t + l];
        lane[l] += d * d;
      }
    for (int l = 0; t < n; ++t, ++l) {
      const double d = static_cast<double>(x[t]) - s * q[t];
      lane[l] += d * d;
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  });
}

struct Operand {
  Tensor t;  // contiguous
  int64_t rows = 0, cols = 0;
};

void check_weights(const QLinearWeights& w, const char* op) {
  OCTET_CHECK(w.codes.defined() && w.row_sums.defined(), op, ": weights not prepared (call qlinear_prepare)");
  OCTET_CHECK(w.codes.dtype() == DType::i8 && w.codes.dim() == 2 && w.codes.size(0) == w.rows &&
                  w.codes.size(1) == w.cols && w.codes.is_contiguous(),
              op, ": expected contiguous i8 codes [", w.rows, ", ", w.cols, "], got ", w.codes.dtype(), " ",
              w.codes.shape());
  OCTET_CHECK(w.row_sums.dtype() == DType::i32 && w.row_sums.dim() == 1 && w.row_sums.size(0) == w.rows &&
                  w.row_sums.is_contiguous(),
              op, ": expected contiguous i32 row sums [", w.rows, "], got ", w.row_sums.dtype(), " ",
              w.row_sums.shape());
  OCTET_CHECK(w.codes.device() == w.row_sums.device(), op, ": codes on ", w.codes.device(), " but row sums on ",
              w.row_sums.device());
  OCTET_CHECK(w.w.type == QType::s8 && w.w.zero_point == 0, op, ": expected symmetric s8 weight parameters");
  OCTET_CHECK(std::isfinite(w.w.scale) && w.w.scale > 0.0f, op, ": expected a finite weight scale > 0, got ",
              w.w.scale);
}

// x f32 [batch, w.cols] (contiguous, detached) and bias checked against w.
Operand check_linear_input(const QLinearWeights& w, const Tensor& x, const Tensor& bias, const char* op) {
  check_weights(w, op);
  OCTET_CHECK(x.defined(), op, ": expected a defined input");
  OCTET_CHECK(x.dtype() == DType::f32, op, ": expected f32 input, got ", x.dtype());
  OCTET_CHECK(x.dim() == 2 && x.size(1) == w.cols, op, ": expected input [batch, ", w.cols, "], got ", x.shape());
  OCTET_CHECK(x.device() == w.codes.device(), op, ": input on ", x.device(), " but weights on ", w.codes.device());
  if (bias.defined()) {
    OCTET_CHECK(bias.dtype() == DType::f32 && bias.dim() == 1 && bias.size(0) == w.rows, op, ": expected f32 bias [",
                w.rows, "], got ", bias.dtype(), " ", bias.shape());
    OCTET_CHECK(bias.device() == x.device(), op, ": bias on ", bias.device(), " but input on ", x.device());
  }
  return {x.detach().contiguous(), x.size(0), x.size(1)};
}

}  // namespace

int32_t qmin(QType t) { return t == QType::u8 ? 0 : -128; }
int32_t qmax(QType t) { return t == QType::u8 ? 255 : 127; }

QParams choose_qparams(float min, float max, QType type, bool symmetric) {
  check_type(type, "choose_qparams");
  OCTET_CHECK(std::isfinite(min) && std::isfinite(max), "choose_qparams: expected finite bounds, got [", min, ", ", max,
              "]");
  OCTET_CHECK(min <= max, "choose_qparams: expected min <= max, got [", min, ", ", max, "]");
  const double lo = std::min(0.0, static_cast<double>(min)), hi = std::max(0.0, static_cast<double>(max));
  QParams p;
  p.type = type;
  if (lo == hi) return p;  // scale 1, zero point 0
  const auto levels = static_cast<double>(qmax(type) - qmin(type));
  if (symmetric) {
    const double amax = std::max(-lo, hi);
    p.scale = static_cast<float>(amax / (type == QType::s8 ? 127.0 : levels));
    p.zero_point = 0;
  } else {
    p.scale = static_cast<float>((hi - lo) / levels);
  }
  // A range below the smallest float step: the smallest positive scale still codes it.
  if (!(p.scale > 0.0f)) p.scale = std::numeric_limits<float>::denorm_min();
  if (!symmetric) {
    const double z = std::nearbyint(qmin(type) - lo / static_cast<double>(p.scale));
    p.zero_point =
        static_cast<int32_t>(std::clamp(z, static_cast<double>(qmin(type)), static_cast<double>(qmax(type))));
  }
  return p;
}

int32_t quantize_value(float x, const QParams& p) {
  if (std::isnan(x)) return p.zero_point;
  const float r = std::nearbyint(x / p.scale) + static_cast<float>(p.zero_point);
  return static_cast<int32_t>(std::clamp(r, static_cast<float>(qmin(p.type)), static_cast<float>(qmax(p.type))));
}

void quantize_array(const float* x, int64_t n, const QParams& p, void* q) {
  check_params(p, "quantize_array");
  OCTET_CHECK(n >= 0, "quantize_array: expected n >= 0, got ", n);
  if (n == 0) return;
  OCTET_CHECK(x != nullptr && q != nullptr, "quantize_array: null pointer");
  const float scale = p.scale, zero = static_cast<float>(p.zero_point);
  const float lo = static_cast<float>(qmin(p.type)), hi = static_cast<float>(qmax(p.type));
  // The same operations as quantize_value, branch-free so the loop vectorizes (bit-identical).
  auto run = [=]<typename T>(T* out) {
    octet::cpu::simd_dispatch([=] {
      for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        float r = std::nearbyint(v / scale) + zero;
        r = r < lo ? lo : r;
        r = r > hi ? hi : r;
        r = v != v ? zero : r;
        out[i] = static_cast<T>(static_cast<int32_t>(r));
      }
    });
  };
  if (p.type == QType::u8)
    run(static_cast<uint8_t*>(q));
  else
    run(static_cast<int8_t*>(q));
}

void qgemm(int64_t m, int64_t n, int64_t k, QType ta, const void* a, int64_t lda, const int32_t* za, QType tb,
           const void* b, int64_t ldb, int32_t zb, int32_t* c, int64_t ldc, const int32_t* b_row_sums) {
  check_qgemm_args("qgemm", m, n, k, ta, a, lda, za, tb, b, ldb, zb, c, ldc);
  cpu::qgemm(cpu::qgemm_path(), m, n, k, ta, a, lda, za, tb, b, ldb, zb, c, ldc, b_row_sums);
}

void qgemm_reference(int64_t m, int64_t n, int64_t k, QType ta, const void* a, int64_t lda, const int32_t* za, QType tb,
                     const void* b, int64_t ldb, int32_t zb, int32_t* c, int64_t ldc) {
  check_qgemm_args("qgemm_reference", m, n, k, ta, a, lda, za, tb, b, ldb, zb, c, ldc);
  auto code = [](QType t, const void* p, int64_t idx) -> int64_t {
    return t == QType::u8 ? static_cast<const uint8_t*>(p)[idx] : static_cast<const int8_t*>(p)[idx];
  };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t t = 0; t < k; ++t) s += (code(ta, a, i * lda + t) - za[i]) * (code(tb, b, j * ldb + t) - zb);
      c[i * ldc + j] = static_cast<int32_t>(s);
    }
}

QMultiplier quantize_multiplier(double m) {
  OCTET_CHECK(std::isfinite(m) && m > 0.0 && m < 2147483648.0,
              "quantize_multiplier: expected a real multiplier in (0, 2^31), got ", m);
  int e = 0;
  const double q = std::frexp(m, &e);  // m = q 2^e, q in [1/2, 1)
  auto mult = static_cast<int64_t>(std::llround(q * 2147483648.0));
  if (mult == (int64_t{1} << 31)) {  // q rounded up to 1
    mult /= 2;
    ++e;
  }
  OCTET_CHECK(e <= 31, "quantize_multiplier: multiplier ", m, " rounds up to 2^31");
  return {static_cast<int32_t>(mult), e};
}

int32_t requantize(int32_t acc, const QMultiplier& m, int32_t zero_point, QType out) {
  OCTET_CHECK(m.multiplier >= (int32_t{1} << 30) && m.exponent <= 31,
              "requantize: expected a multiplier in [2^30, 2^31) and an exponent <= 31, got ", m.multiplier, ", ",
              m.exponent);
  check_type(out, "requantize");
  const int64_t lo = qmin(out), hi = qmax(out);
  int64_t v;
  if (m.exponent > 0) {
    // Shift first (as TFLite does) so the rounding happens once at full precision. A product that
    // leaves int32 is at least 2^30 in size after scaling: it saturates.
    const int64_t shifted = static_cast<int64_t>(acc) * (int64_t{1} << m.exponent);
    if (shifted > std::numeric_limits<int32_t>::max()) return static_cast<int32_t>(hi);
    if (shifted < std::numeric_limits<int32_t>::min()) return static_cast<int32_t>(lo);
    v = rounding_doubling_high_mul(static_cast<int32_t>(shifted), m.multiplier);
  } else {
    v = rounding_shift_right(rounding_doubling_high_mul(acc, m.multiplier), -m.exponent);
  }
  return static_cast<int32_t>(std::clamp(static_cast<int64_t>(zero_point) + v, lo, hi));
}

QLinearWeights QLinearWeights::to(Device d) const {
  QLinearWeights r = *this;
  if (codes.defined()) r.codes = codes.to(d);
  if (row_sums.defined()) r.row_sums = row_sums.to(d);
  return r;
}

QLinearWeights qlinear_prepare(const Tensor& w, bool clip_search) {
  OCTET_CHECK(w.defined(), "qlinear_prepare: expected a defined weight");
  OCTET_CHECK(w.dtype() == DType::f32, "qlinear_prepare: expected f32 weights, got ", w.dtype());
  OCTET_CHECK(w.dim() == 2 && w.size(0) > 0 && w.size(1) > 0, "qlinear_prepare: expected weights [rows, cols], got ",
              w.shape());
  OCTET_CHECK(w.size(1) <= kQGemmMaxK, "qlinear_prepare: ", w.size(1), " columns: the int32 sums are only exact for ",
              kQGemmMaxK);
  const Device dev = w.device();
  const Tensor host = w.detach().to(Device::cpu()).contiguous();
  const float* wp = host.data<float>();
  QLinearWeights out;
  out.rows = w.size(0);
  out.cols = w.size(1);
  const int64_t n = out.rows * out.cols;
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    OCTET_CHECK(std::isfinite(wp[i]), "qlinear_prepare: non-finite weight ", wp[i], " at index ", i);
    amax = std::max(amax, std::abs(wp[i]));
  }
  out.w = choose_qparams(-amax, amax, QType::s8, /*symmetric=*/true);
  if (clip_search && amax > 0.0f) {
    // Candidate clips amax * i / 100; each row's squared errors summed in a fixed order (the
    // choice does not depend on the thread count); the largest clip wins a tie.
    constexpr int kCandidates = 100;
    std::vector<QParams> cand(kCandidates);
    for (int i = 0; i < kCandidates; ++i) {
      const auto c = static_cast<float>(static_cast<double>(amax) * (i + 1) / kCandidates);
      cand[i] = choose_qparams(-c, c, QType::s8, true);
    }
    std::vector<double> err(static_cast<size_t>(kCandidates * out.rows));
    parallel_for(0, out.rows, 1, [&](int64_t r0, int64_t r1) {
      std::vector<int8_t> q(static_cast<size_t>(out.cols));
      for (int64_t r = r0; r < r1; ++r) {
        const float* row = wp + r * out.cols;
        for (int i = 0; i < kCandidates; ++i) {
          quantize_array(row, out.cols, cand[i], q.data());
          err[i * out.rows + r] = squared_error(row, q.data(), out.cols, cand[i].scale);
        }
      }
    });
    double best = std::numeric_limits<double>::infinity();
    for (int i = kCandidates - 1; i >= 0; --i) {
      double e = 0.0;
      for (int64_t r = 0; r < out.rows; ++r) e += err[i * out.rows + r];
      if (e < best) {
        best = e;
        out.w = cand[i];
      }
    }
  }
  Tensor codes = empty({out.rows, out.cols}, DType::i8);
  quantize_array(wp, n, out.w, codes.data<int8_t>());
  Tensor sums = empty({out.rows}, DType::i32);
  cpu::qgemm_row_sums(out.rows, out.cols, QType::s8, codes.data<int8_t>(), out.cols, sums.data<int32_t>());
  out.codes = dev.is_cpu() ? codes : codes.to(dev);
  out.row_sums = dev.is_cpu() ? sums : sums.to(dev);
  return out;
}

Tensor qlinear(const QLinearWeights& w, const Tensor& x, const Tensor& bias) {
  const Operand xo = check_linear_input(w, x, bias, "qlinear");
  return dispatch::qlinear_rows(w, xo.t, bias.defined() ? bias.contiguous() : bias);
}

Tensor qlinear_reference(const QLinearWeights& w, const Tensor& x, const Tensor& bias) {
  check_weights(w, "qlinear_reference");
  OCTET_CHECK(x.defined() && x.dtype() == DType::f32 && x.dim() == 2 && x.size(1) == w.cols,
              "qlinear_reference: expected f32 input [batch, ", w.cols, "]");
  const Tensor xh = x.detach().to(Device::cpu()).contiguous();
  const Tensor wc = w.codes.to(Device::cpu());
  const Tensor bh = bias.defined() ? bias.detach().to(Device::cpu()).contiguous() : Tensor();
  OCTET_CHECK(!bh.defined() || (bh.dtype() == DType::f32 && bh.numel() == w.rows),
              "qlinear_reference: expected f32 bias [", w.rows, "]");
  const int64_t batch = xh.size(0), cols = w.cols, rows = w.rows;
  std::vector<uint8_t> codes(static_cast<size_t>(batch * cols));
  std::vector<float> scale(static_cast<size_t>(batch));
  std::vector<int32_t> za(static_cast<size_t>(batch));
  if (batch > 0) cpu::quantize_rows_u8(xh.data<float>(), batch, cols, codes.data(), scale.data(), za.data());
  Tensor y = empty({batch, rows}, DType::f64);
  double* yp = y.data<double>();
  const int8_t* q = wc.data<int8_t>();
  const double sw = w.w.scale;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0.0;
      for (int64_t t = 0; t < cols; ++t)
        s += (static_cast<double>(scale[b]) * (codes[b * cols + t] - za[b])) * (sw * q[r * cols + t]);
      yp[b * rows + r] = s + (bh.defined() ? static_cast<double>(bh.data<float>()[r]) : 0.0);
    }
  return y;
}

}  // namespace octet::quant
