// Zero-point GEMM (quant/qgemm.h, quant/cpu/qgemm.h): every CPU path equals qgemm_reference on
// random codes with the extremes frequent, odd sizes and all four operand types; qgemm equals the
// float64 product of the dequantized operands; choose_qparams, quantize_value/array, the
// fixed-point requantization; qlinear against its float64 reference; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"
#include "quant/cpu/qgemm.h"
#include "quant/qgemm.h"
#include "tests/isa_scope.h"

namespace octet::quant {
namespace {

using cpu::QgemmPath;

std::vector<QgemmPath> supported_paths() {
  std::vector<QgemmPath> paths;
  for (QgemmPath p :
       {QgemmPath::automatic, QgemmPath::portable, QgemmPath::avx2, QgemmPath::avx512_vnni, QgemmPath::dnnl})
    if (cpu::qgemm_path_supported(p)) paths.push_back(p);
  return paths;
}

struct Lcg {
  uint32_t s;
  uint32_t next() {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  }
  int32_t in(int32_t lo, int32_t hi) { return lo + static_cast<int32_t>(next() % static_cast<uint32_t>(hi - lo + 1)); }
};

// Codes of type t with the extremes frequent; bytes stored as the type's bit pattern.
std::vector<uint8_t> random_codes(int64_t n, QType t, Lcg& g) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& e : v) {
    const uint32_t r = g.next() % 5;
    const int32_t code = r == 0 ? qmin(t) : r == 1 ? qmax(t) : g.in(qmin(t), qmax(t));
    e = static_cast<uint8_t>(code);
  }
  return v;
}

const char* type_name(QType t) { return t == QType::u8 ? "u8" : "s8"; }

void check_paths(int64_t m, int64_t n, int64_t k, QType ta, QType tb, int64_t pad, bool extreme_zero, Lcg& g,
                 bool give_sums) {
  const int64_t lda = k + pad, ldb = k + 2 * pad, ldc = n + pad;
  const std::vector<uint8_t> a = random_codes(m * lda, ta, g), b = random_codes(n * ldb, tb, g);
  std::vector<int32_t> za(static_cast<size_t>(m));
  for (auto& z : za) z = extreme_zero ? (g.next() % 2 ? qmin(ta) : qmax(ta)) : g.in(qmin(ta), qmax(ta));
  const int32_t zb = extreme_zero ? qmax(tb) : g.in(qmin(tb), qmax(tb));
  std::vector<int32_t> sums(static_cast<size_t>(n));
  cpu::qgemm_row_sums(n, k, tb, b.data(), ldb, sums.data());
  std::vector<int32_t> want(static_cast<size_t>(m * ldc), -7);
  qgemm_reference(m, n, k, ta, a.data(), lda, za.data(), tb, b.data(), ldb, zb, want.data(), ldc);
  for (QgemmPath p : supported_paths()) {
    std::vector<int32_t> c(static_cast<size_t>(m * ldc), -7);
    cpu::qgemm(p, m, n, k, ta, a.data(), lda, za.data(), tb, b.data(), ldb, zb, c.data(), ldc,
               give_sums ? sums.data() : nullptr);
    ASSERT_EQ(c, want) << cpu::qgemm_path_name(p) << " m" << m << " n" << n << " k" << k << " " << type_name(ta) << "x"
                       << type_name(tb) << " pad" << pad;
  }
}

constexpr QType kTypes[] = {QType::u8, QType::s8};

TEST(QGemm, EveryPathEqualsReferenceOnOddSizes) {
  Lcg g{1};
  const int64_t ks[] = {1, 3, 63, 65, 131, 200};
  for (int64_t m = 1; m <= 9; ++m)
    for (int64_t k : ks)
      for (QType ta : kTypes)
        for (QType tb : kTypes) {
          const int64_t n = 1 + 2 * static_cast<int64_t>(g.next() % 11);  // odd, 1..21
          check_paths(m, n, k, ta, tb, (m + k) % 3, m % 4 == 0, g, m % 2 == 0);
        }
}

TEST(QGemm, LargerBatchesAndLongRows) {
  Lcg g{2};
  for (QType ta : kTypes)
    for (QType tb : kTypes) {
      check_paths(17, 33, 1027, ta, tb, 1, false, g, true);
      check_paths(40, 7, 259, ta, tb, 0, true, g, false);
    }
}

// Enough work per call for the threads to split the weight rows (chunk edges off the kernels' tiles).
TEST(QGemm, ThreadedSplitsEqualReference) {
  const int prev = get_num_threads();
  set_num_threads(3);
  Lcg g{11};
  check_paths(1, 257, 4099, QType::u8, QType::s8, 0, false, g, true);
  check_paths(7, 131, 2051, QType::s8, QType::u8, 3, false, g, false);
  set_num_threads(prev);
}

// The largest sums the contract allows: every (a - za)(b - zb) = 255 * 255 at k = kQGemmMaxK.
TEST(QGemm, LargestSumsAreExact) {
  const int64_t m = 2, n = 3, k = kQGemmMaxK;
  std::vector<uint8_t> a(m * k, 255);
  std::vector<int8_t> b(n * k, -128);
  std::vector<int32_t> za(m, 0);
  for (QgemmPath p : supported_paths()) {
    std::vector<int32_t> c(m * n);
    cpu::qgemm(p, m, n, k, QType::u8, a.data(), k, za.data(), QType::s8, b.data(), k, 127, c.data(), n, nullptr);
    for (int32_t v : c) ASSERT_EQ(v, -int64_t{255} * 255 * k) << cpu::qgemm_path_name(p);
  }
}

// qgemm's integers equal the float64 product of the dequantized operands divided by the scales.
TEST(QGemm, EqualsFloat64ProductOfDequantizedOperands) {
  Lcg g{3};
  const int64_t m = 3, n = 5, k = 77;
  const std::vector<uint8_t> a = random_codes(m * k, QType::u8, g);
  const std::vector<uint8_t> b = random_codes(n * k, QType::s8, g);
  const QParams pa{0.037f, 131, QType::u8}, pb{0.0021f, -5, QType::s8};
  std::vector<int32_t> za(m, pa.zero_point), c(m * n);
  qgemm(m, n, k, QType::u8, a.data(), k, za.data(), QType::s8, b.data(), k, pb.zero_point, c.data(), n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t t = 0; t < k; ++t)
        s += (double{pa.scale} * (a[i * k + t] - pa.zero_point)) *
             (double{pb.scale} * (static_cast<int8_t>(b[j * k + t]) - pb.zero_point));
      const double real = double{pa.scale} * pb.scale * c[i * n + j];
      EXPECT_NEAR(real, s, 1e-12 * (1.0 + std::abs(s))) << i << "," << j;
    }
}

TEST(QGemm, PathSelection) {
  EXPECT_TRUE(cpu::qgemm_path_supported(QgemmPath::portable));
  EXPECT_EQ(cpu::qgemm_path(), QgemmPath::automatic);
  const QgemmPath prev = cpu::set_qgemm_path(QgemmPath::portable);
  EXPECT_EQ(cpu::qgemm_path(), QgemmPath::portable);
  cpu::set_qgemm_path(prev);
  if (!cpu::qgemm_path_supported(QgemmPath::dnnl)) {
    EXPECT_THROW(cpu::set_qgemm_path(QgemmPath::dnnl), Error);
  }
#ifdef __x86_64__
  // The kernels run wherever the CPU has their instructions (so the tests above cover them).
  EXPECT_EQ(cpu::qgemm_path_supported(QgemmPath::avx2), ::octet::cpu::isa_supported(::octet::cpu::Isa::avx2));
  EXPECT_EQ(cpu::qgemm_path_supported(QgemmPath::avx512_vnni),
            ::octet::cpu::isa_supported(::octet::cpu::Isa::avx512) && __builtin_cpu_supports("avx512vnni"));
#endif
}

// ctest runs the QGemm suite once more as "int8_without_vnni" (ONEDNN_MAX_CPU_ISA=AVX512_CORE):
// oneDNN's u8s8s32 GEMM then saturates, so its path must be unsupported (the own kernels stay).
TEST(QGemm, ProbeSeesSaturationWithoutVnni) {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (isa == nullptr || std::string(isa) != "AVX512_CORE")
    GTEST_SKIP() << "runs in the ctest int8_without_vnni (ONEDNN_MAX_CPU_ISA=AVX512_CORE)";
  EXPECT_FALSE(cpu::qgemm_path_supported(QgemmPath::dnnl));
}

TEST(QGemm, EmptyAndZeroK) {
  std::vector<uint8_t> a(6, 3), b(6, 3);
  std::vector<int32_t> za(2, 1), c(6, 9);
  for (QgemmPath p : supported_paths()) {
    std::fill(c.begin(), c.end(), 9);
    cpu::qgemm(p, 2, 3, 0, QType::u8, a.data(), 1, za.data(), QType::s8, b.data(), 1, 0, c.data(), 3, nullptr);
    EXPECT_EQ(c, std::vector<int32_t>(6, 0));
  }
  qgemm(0, 3, 2, QType::u8, a.data(), 2, nullptr, QType::s8, b.data(), 2, 0, c.data(), 3);
}

TEST(QGemm, RejectsBadArguments) {
  std::vector<uint8_t> a(64), b(64);
  std::vector<int32_t> za(4, 0), c(64);
  auto call = [&](int64_t m, int64_t n, int64_t k, int64_t lda, int32_t za0, int32_t zb, QType ta = QType::u8,
                  QType tb = QType::s8) {
    za[0] = za0;
    qgemm(m, n, k, ta, a.data(), lda, za.data(), tb, b.data(), k, zb, c.data(), n);
  };
  EXPECT_THROW(call(-1, 2, 2, 2, 0, 0), Error);
  EXPECT_THROW(call(2, 2, 3, 2, 0, 0), Error);                         // lda < k
  EXPECT_THROW(call(2, 2, 2, 2, 256, 0), Error);                       // u8 zero point out of range
  EXPECT_THROW(call(2, 2, 2, 2, -129, 0, QType::s8), Error);           // s8 zero point out of range
  EXPECT_THROW(call(2, 2, 2, 2, 0, 128), Error);                       // s8 zb out of range
  EXPECT_THROW(call(2, 2, 2, 2, 0, -1, QType::u8, QType::u8), Error);  // u8 zb out of range
  EXPECT_THROW(call(2, 2, 2, 2, 0, 0, static_cast<QType>(7)), Error);
  try {
    qgemm(1, 1, kQGemmMaxK + 1, QType::u8, a.data(), kQGemmMaxK + 1, za.data(), QType::s8, b.data(), kQGemmMaxK + 1, 0,
          c.data(), 1);
    ADD_FAILURE() << "k too large accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qgemm: k="), std::string::npos) << e.what();
  }
}

// ---- parameters and codes

TEST(QParamsTest, ZeroExactAndRangeCovered) {
  Lcg g{4};
  for (int it = 0; it < 2000; ++it)
    for (QType t : kTypes) {
      float lo = (static_cast<float>(g.next() % 20001) - 10000.0f) / 997.0f;
      if (it % 7 == 0) lo = std::abs(lo);  // ranges not holding 0
      float hi = lo + static_cast<float>(g.next() % 20001) / 331.0f;
      if (it % 11 == 0) hi = -std::abs(hi) - 1.0f, lo = hi - 3.0f;
      const QParams p = choose_qparams(lo, hi, t);
      ASSERT_GT(p.scale, 0.0f);
      ASSERT_GE(p.zero_point, qmin(t));
      ASSERT_LE(p.zero_point, qmax(t));
      // real 0 has the exact code zero_point
      ASSERT_EQ(quantize_value(0.0f, p), p.zero_point);
      // min and max round-trip within half a step (plus float rounding of the scale)
      for (float x : {lo, hi}) {
        const double back = double{p.scale} * (quantize_value(x, p) - p.zero_point);
        ASSERT_LE(std::abs(back - x), 0.5 * p.scale * (1.0 + 1e-5) + 1e-6 * std::abs(x))
            << "[" << lo << ", " << hi << "] " << type_name(t) << " x=" << x;
      }
    }
}

TEST(QParamsTest, SymmetricAndDegenerate) {
  const QParams s = choose_qparams(-2.0f, 0.5f, QType::s8, true);
  EXPECT_EQ(s.zero_point, 0);
  EXPECT_FLOAT_EQ(s.scale, 2.0f / 127.0f);
  EXPECT_EQ(quantize_value(-2.0f, s), -127);    // -128 never produced
  EXPECT_EQ(quantize_value(-100.0f, s), -128);  // outside the range: clamped to the type's
  const QParams z = choose_qparams(0.0f, 0.0f, QType::u8);
  EXPECT_EQ(z.scale, 1.0f);
  EXPECT_EQ(z.zero_point, 0);
  EXPECT_THROW(choose_qparams(std::numeric_limits<float>::quiet_NaN(), 1.0f, QType::u8), Error);
  EXPECT_THROW(choose_qparams(0.0f, std::numeric_limits<float>::infinity(), QType::u8), Error);
  EXPECT_THROW(choose_qparams(2.0f, 1.0f, QType::u8), Error);
}

TEST(QParamsTest, QuantizeArrayMatchesValue) {
  Lcg g{5};
  std::vector<float> x(1003);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<float>(g.next() % 100001) - 50000.0f) / 3000.0f;
  x[0] = std::numeric_limits<float>::quiet_NaN();
  x[1] = std::numeric_limits<float>::infinity();
  x[2] = -std::numeric_limits<float>::infinity();
  x[3] = 0.5f * 0.1f;  // near a tie
  for (QType t : kTypes) {
    const QParams p = choose_qparams(-7.0f, 9.0f, t);
    std::vector<uint8_t> q(x.size());
    for (::octet::cpu::Isa isa : {::octet::cpu::Isa::portable, ::octet::cpu::Isa::avx2, ::octet::cpu::Isa::avx512}) {
      if (!::octet::cpu::isa_supported(isa)) continue;
      {
        ::octet::testing::IsaScope isa_scope;
        ::octet::cpu::set_active_isa(isa);
        quantize_array(x.data(), static_cast<int64_t>(x.size()), p, q.data());
      }
      for (size_t i = 0; i < x.size(); ++i) {
        const int32_t got = t == QType::u8 ? int32_t{q[i]} : int32_t{static_cast<int8_t>(q[i])};
        ASSERT_EQ(got, quantize_value(x[i], p)) << i << " " << x[i];
      }
    }
    EXPECT_EQ(quantize_value(x[0], p), p.zero_point);
    EXPECT_EQ(quantize_value(x[1], p), qmax(t));
    EXPECT_EQ(quantize_value(x[2], p), qmin(t));
  }
  EXPECT_THROW(quantize_array(x.data(), 3, QParams{0.0f, 0, QType::u8}, x.data()), Error);
  EXPECT_THROW(quantize_array(x.data(), 3, QParams{1.0f, 300, QType::u8}, x.data()), Error);
}

// ---- requantization

TEST(Requantize, WithinOneUnitOfRealValue) {
  Lcg g{6};
  for (int it = 0; it < 20000; ++it) {
    // M from about 2^-33 to 2^4
    const double mant = 1.0 + (g.next() % 1000003) / 1000003.0;
    const double m = std::ldexp(mant, static_cast<int>(g.next() % 38) - 34);
    const QMultiplier qm = quantize_multiplier(m);
    ASSERT_GE(qm.multiplier, int32_t{1} << 30);
    ASSERT_NEAR(std::ldexp(static_cast<double>(qm.multiplier), qm.exponent - 31), m, m * 1e-9);
    const int32_t acc = it % 10 == 0
                            ? (it % 20 == 0 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min())
                            : static_cast<int32_t>(g.next() * 2654435761u);
    for (QType t : kTypes) {
      const int32_t zero = g.in(qmin(t), qmax(t));
      const double real = zero + static_cast<double>(acc) * m;
      const double want = std::clamp(real, static_cast<double>(qmin(t)), static_cast<double>(qmax(t)));
      const int32_t got = requantize(acc, qm, zero, t);
      ASSERT_LE(std::abs(got - want), 1.0) << "acc " << acc << " M " << m << " zero " << zero;
      ASSERT_GE(got, qmin(t));
      ASSERT_LE(got, qmax(t));
    }
  }
}

TEST(Requantize, SmallAccumulatorsExactlyRounded) {
  // acc * M with M = 1/4: 6/4 -> 2 (away from zero), -6/4 -> -2, 5/4 -> 1.
  const QMultiplier q = quantize_multiplier(0.25);
  EXPECT_EQ(q.multiplier, int32_t{1} << 30);
  EXPECT_EQ(q.exponent, -1);
  EXPECT_EQ(requantize(6, q, 0, QType::s8), 2);
  EXPECT_EQ(requantize(-6, q, 0, QType::s8), -2);
  // gemmlowp rounds twice: 5/4 -> high mul 5/2 -> 3 -> shift 3/2 -> 2 (the real value 1.25: one unit off)
  EXPECT_EQ(requantize(5, q, 0, QType::s8), 2);
  EXPECT_EQ(requantize(7, q, 0, QType::s8), 2);
  EXPECT_EQ(requantize(-7, q, 0, QType::s8), -2);
  EXPECT_EQ(requantize(1000, q, 10, QType::u8), 255);  // saturates
  EXPECT_EQ(requantize(-1000, q, 10, QType::u8), 0);
  EXPECT_EQ(requantize(1000, quantize_multiplier(3.0), -20, QType::s8), 127);
  EXPECT_EQ(requantize(7, quantize_multiplier(3.0), -20, QType::s8), 1);
  EXPECT_EQ(requantize(std::numeric_limits<int32_t>::max(), quantize_multiplier(1e-12), 5, QType::u8), 5);
  EXPECT_THROW(quantize_multiplier(0.0), Error);
  EXPECT_THROW(quantize_multiplier(-1.0), Error);
  EXPECT_THROW(quantize_multiplier(std::ldexp(1.0, 31)), Error);
  EXPECT_THROW(quantize_multiplier(std::numeric_limits<double>::quiet_NaN()), Error);
  EXPECT_THROW(requantize(1, QMultiplier{5, 0}, 0, QType::u8), Error);
}

// ---- the Linear baseline

// y = float(acc) * float(sa * sw) + bias: four float roundings (acc, the scale product, the
// multiply, the bias add), each at most 2^-24 relative to a value bounded by
// sum_K |dequantized x| |dequantized w| + |bias|.
constexpr double kLinearRelTol = 4.0 * 0x1p-24;

void expect_linear_close(const Tensor& y, const Tensor& ref, const QLinearWeights& w, const Tensor& wt, const Tensor& x,
                         const Tensor& bias) {
  ASSERT_EQ(y.shape(), ref.shape());
  const std::vector<float> yv = y.to_vector<float>(), xv = x.to_vector<float>(), wv = wt.to_vector<float>();
  const std::vector<float> bv = bias.defined() ? bias.to_vector<float>() : std::vector<float>(w.rows, 0.0f);
  const std::vector<double> rv = ref.to_vector<double>();
  const int64_t batch = x.size(0), cols = x.size(1);
  for (int64_t b = 0; b < batch; ++b) {
    double xmax = 0.0;
    for (int64_t t = 0; t < cols; ++t) xmax = std::max(xmax, std::abs(double{xv[b * cols + t]}));
    const double step_x = 2.0 * xmax / 255.0;  // an upper bound of the row's scale
    for (int64_t r = 0; r < w.rows; ++r) {
      const size_t idx = static_cast<size_t>(b * w.rows + r);
      double bound = std::abs(double{bv[r]});
      for (int64_t t = 0; t < cols; ++t)
        bound += (std::abs(double{xv[b * cols + t]}) + step_x) * (std::abs(double{wv[r * cols + t]}) + w.w.scale);
      ASSERT_NEAR(yv[idx], rv[idx], kLinearRelTol * bound) << b << "," << r;
    }
  }
}

TEST(QLinear, EqualsReferenceWithinFloatRounding) {
  Generator gen(7);
  for (int64_t batch : {1, 3, 8, 11}) {
    const int64_t rows = 37, cols = 131;
    const Tensor wt = randn({rows, cols}, {}, &gen);
    const Tensor x = randn({batch, cols}, {}, &gen);
    const Tensor bias = randn({rows}, {}, &gen);
    const QLinearWeights w = qlinear_prepare(wt);
    EXPECT_EQ(w.w.zero_point, 0);
    EXPECT_EQ(w.w.type, QType::s8);
    for (QgemmPath p : supported_paths()) {
      const QgemmPath prev = cpu::set_qgemm_path(p);
      const Tensor y = qlinear(w, x, bias);
      cpu::set_qgemm_path(prev);
      expect_linear_close(y, qlinear_reference(w, x, bias), w, wt, x, bias);
      expect_linear_close(qlinear(w, x), qlinear_reference(w, x), w, wt, x, Tensor());
    }
    // the quantized product is close to the float one (int8 weights and uint8 activations)
    const Tensor y = qlinear(w, x, bias);
    const std::vector<float> yv = y.to_vector<float>();
    const std::vector<float> fv = (matmul(x, wt.t()) + bias).to_vector<float>();
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < yv.size(); ++i) err += (yv[i] - fv[i]) * (yv[i] - fv[i]), norm += fv[i] * fv[i];
    EXPECT_LT(std::sqrt(err / norm), 0.05);
  }
}

// Each row's codes from its own (min, max) parameters, element by element as quantize_value.
TEST(QLinear, RowQuantizerMatchesDefinition) {
  Generator gen(12);
  const int64_t batch = 4, cols = 77;
  Tensor x = randn({batch, cols}, {}, &gen);
  float* xp = x.data<float>();
  for (int64_t t = 0; t < cols; ++t) xp[cols + t] = std::abs(xp[cols + t]) + 1.0f;  // all positive
  for (int64_t t = 0; t < cols; ++t) xp[2 * cols + t] = 0.0f;                       // all zero
  xp[3 * cols + 5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint8_t> codes(batch * cols);
  std::vector<float> scale(batch);
  std::vector<int32_t> zero(batch);
  cpu::quantize_rows_u8(xp, batch, cols, codes.data(), scale.data(), zero.data());
  for (int64_t b = 0; b < 3; ++b) {
    float lo = xp[b * cols], hi = xp[b * cols];
    for (int64_t t = 0; t < cols; ++t) lo = std::min(lo, xp[b * cols + t]), hi = std::max(hi, xp[b * cols + t]);
    const QParams p = choose_qparams(lo, hi, QType::u8);
    EXPECT_EQ(scale[b], p.scale) << b;
    EXPECT_EQ(zero[b], p.zero_point) << b;
    for (int64_t t = 0; t < cols; ++t) ASSERT_EQ(codes[b * cols + t], quantize_value(xp[b * cols + t], p)) << b;
  }
  EXPECT_TRUE(std::isnan(scale[3]));
}

// The exact float form of the contract (the CUDA kernels give the same bits):
// y = float(acc) * (scale_a * scale_w) + bias.
TEST(QLinear, OutputIsTheContractsFloatFormula) {
  Generator gen(13);
  const int64_t batch = 5, rows = 23, cols = 301;
  const Tensor wt = randn({rows, cols}, {}, &gen), x = randn({batch, cols}, {}, &gen), bias = randn({rows}, {}, &gen);
  const QLinearWeights w = qlinear_prepare(wt);
  std::vector<uint8_t> codes(batch * cols);
  std::vector<float> scale(batch);
  std::vector<int32_t> zero(batch), acc(batch * rows);
  cpu::quantize_rows_u8(x.data<float>(), batch, cols, codes.data(), scale.data(), zero.data());
  qgemm_reference(batch, rows, cols, QType::u8, codes.data(), cols, zero.data(), QType::s8, w.codes.data<int8_t>(),
                  cols, 0, acc.data(), rows);
  const std::vector<float> y = qlinear(w, x, bias).to_vector<float>(), bv = bias.to_vector<float>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      const float s = scale[b] * w.w.scale;
      ASSERT_EQ(y[b * rows + r], static_cast<float>(acc[b * rows + r]) * s + bv[r]) << b << "," << r;
    }
}

TEST(QLinear, NonFiniteRowsGiveNaN) {
  Generator gen(8);
  const QLinearWeights w = qlinear_prepare(randn({5, 9}, {}, &gen));
  Tensor x = randn({3, 9}, {}, &gen);
  float* xp = x.data<float>();
  xp[9 + 4] = std::numeric_limits<float>::infinity();
  const std::vector<float> y = qlinear(w, x).to_vector<float>();
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t r = 0; r < 5; ++r) EXPECT_EQ(std::isnan(y[b * 5 + r]), b == 1) << b << "," << r;
  xp[9 + 4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(qlinear(w, x).to_vector<float>()[5]));
}

TEST(QLinear, ClipSearchNeverWorseAndZeroWeights) {
  Generator gen(9);
  Tensor wt = randn({16, 64}, {}, &gen);
  wt.data<float>()[3] = 40.0f;  // an outlier: clipping it lowers the squared error
  const QLinearWeights full = qlinear_prepare(wt, false), clipped = qlinear_prepare(wt, true);
  EXPECT_FLOAT_EQ(full.w.scale, 40.0f / 127.0f);
  EXPECT_LT(clipped.w.scale, full.w.scale);
  auto sq_err = [&](const QLinearWeights& q) {
    const std::vector<float> wv = wt.to_vector<float>();
    const std::vector<int8_t> c = q.codes.to_vector<int8_t>();
    double e = 0.0;
    for (size_t i = 0; i < wv.size(); ++i) e += std::pow(wv[i] - double{q.w.scale} * c[i], 2);
    return e;
  };
  EXPECT_LE(sq_err(clipped), sq_err(full));
  const std::vector<int32_t> sums = clipped.row_sums.to_vector<int32_t>();
  const std::vector<int8_t> codes = clipped.codes.to_vector<int8_t>();
  for (int64_t r = 0; r < 16; ++r) {
    int32_t s = 0;
    for (int64_t t = 0; t < 64; ++t) s += codes[r * 64 + t];
    EXPECT_EQ(sums[r], s);
  }
  const QLinearWeights zero = qlinear_prepare(zeros({3, 4}));
  EXPECT_EQ(zero.w.scale, 1.0f);
  EXPECT_EQ(qlinear(zero, ones({2, 4})).to_vector<float>(), std::vector<float>(6, 0.0f));
}

TEST(QLinear, RejectsBadInput) {
  Generator gen(10);
  const QLinearWeights w = qlinear_prepare(randn({4, 6}, {}, &gen));
  EXPECT_THROW(qlinear(w, randn({2, 5}, {}, &gen)), Error);              // cols mismatch
  EXPECT_THROW(qlinear(w, randn({6}, {}, &gen)), Error);                 // not 2-D
  EXPECT_THROW(qlinear(w, zeros({2, 6}, DType::f64)), Error);            // dtype
  EXPECT_THROW(qlinear(w, randn({2, 6}, {}, &gen), zeros({3})), Error);  // bias shape
  EXPECT_THROW(qlinear(QLinearWeights{}, randn({2, 6}, {}, &gen)), Error);
  QLinearWeights bad = w;
  bad.w.scale = 0.0f;
  EXPECT_THROW(qlinear(bad, randn({2, 6}, {}, &gen)), Error);
  Tensor nonfinite = randn({2, 3}, {}, &gen);
  nonfinite.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(qlinear_prepare(nonfinite), Error);
  EXPECT_THROW(qlinear_prepare(randn({2, 3, 4}, {}, &gen)), Error);
  EXPECT_THROW(qlinear_prepare(zeros({2, 3}, DType::f64)), Error);
  try {
    qlinear(w, randn({2, 5}, {}, &gen));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qlinear"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace octet::quant
