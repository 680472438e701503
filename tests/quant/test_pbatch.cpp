// PrecisionBatching on the CPU (quant/pbatch.h, quant/cpu/pbatch.h): bit-planes that decode to the
// defined codes, every kernel path against the portable one on random planes, pb_linear against the
// float64 reference over many shapes and precisions, the special rows (zero, NaN, inf), the clip
// search, the int64 extremes and the argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/pbatch.h"
#include "quant/pbatch.h"
#include "tests/quant/pb_kernels.h"

namespace octet::quant {
namespace {

using cpu::PbKernel;

using testing::KernelScope;
using testing::supported_kernels;

// Normal values with a few outliers (so the clip search has something to clip) and exact zeros.
Tensor random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (auto& e : v) {
    const int c = pick(gen);
    e = c == 0 ? 0.0f : (c == 1 ? 8.0f * normal(gen) : normal(gen));
  }
  return from_vector(v, {rows, cols});
}

std::vector<uint64_t> random_words(int64_t n, uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<uint64_t> v(static_cast<size_t>(n));
  for (auto& e : v) e = gen();
  return v;
}

// One float ulp at |v|.
double ulp(double v) {
  const float f = static_cast<float>(std::fabs(v));
  return static_cast<double>(std::nextafter(f, std::numeric_limits<float>::infinity()) - f);
}

// pb_linear vs the float64 reference. The kernel's sum is exact; what differs is the rounding of
// double(acc) * (d * s_b) to float (half an ulp of the product) and of the float bias add (half an
// ulp of the result), plus the reference's own double rounding, far below (1e-12 of the magnitude).
void expect_matches_reference(const PbWeights& w, const Tensor& x, int a_bits, const Tensor& bias,
                              const std::string& what) {
  const Tensor y = pb_linear(w, x, a_bits, bias);
  const Tensor ref = pb_linear_reference(w, x, a_bits, bias);
  ASSERT_EQ(y.shape(), ref.shape()) << what;
  const std::vector<float> yv = y.to_vector<float>();
  const std::vector<double> rv = ref.to_vector<double>();
  const std::vector<float> bv = bias.defined() ? bias.to_vector<float>() : std::vector<float>(w.rows, 0.0f);
  // Magnitude sum_K |q| |xq| per output (times d s_b below).
  const std::vector<int32_t> q = pb_decode(w).to_vector<int32_t>();
  const std::vector<int32_t> xq = pb_activation_codes(x, a_bits).to_vector<int32_t>();
  const std::vector<double> sv = pb_quantize_activations(x, a_bits).scale.to_vector<double>();
  const int64_t batch = x.size(0), cols = w.cols;
  std::vector<double> mv(static_cast<size_t>(batch * w.rows), 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < w.rows; ++r)
      for (int64_t k = 0; k < cols; ++k)
        mv[static_cast<size_t>(b * w.rows + r)] +=
            std::fabs(static_cast<double>(q[static_cast<size_t>(r * cols + k)])) *
            std::fabs(static_cast<double>(xq[static_cast<size_t>(b * cols + k)]));
  for (size_t i = 0; i < yv.size(); ++i) {
    const size_t b = i / static_cast<size_t>(w.rows), r = i % static_cast<size_t>(w.rows);
    const double m = mv[i] * w.step * sv[b];
    const double tol = ulp(rv[i] - bv[r]) + ulp(rv[i]) + 1e-12 * m;
    ASSERT_NEAR(yv[i], rv[i], tol) << what << " at [" << b << ", " << r << "]";
  }
}

TEST(PbWeights, PlanesDecodeToTheCodes) {
  const Tensor w = random_matrix(7, 150, 1);
  for (int bits = 1; bits <= kPbMaxWeightBits; ++bits) {
    for (bool clip : {false, true}) {
      const PbWeights p = pb_preprocess(w, bits, clip);
      ASSERT_EQ(p.planes.shape(), Shape({7, bits + 1, pb_words(150)}));
      EXPECT_EQ(p.step, pb_weight_step(w.data<float>(), w.numel(), bits, clip));
      std::vector<int32_t> q(static_cast<size_t>(w.numel()));
      pb_weight_codes(w.data<float>(), w.numel(), bits, p.step, q.data());
      EXPECT_EQ(pb_decode(p).to_vector<int32_t>(), q) << "bits " << bits;
      const int32_t half = bits == 1 ? 1 : 1 << (bits - 1);
      for (int32_t c : q) ASSERT_TRUE(c >= -half && c <= half);
      // The padding past the columns is zero on every plane.
      const std::vector<int64_t> words = p.planes.to_vector<int64_t>();
      for (size_t i = 0; i < words.size(); ++i) {
        const int64_t idx = static_cast<int64_t>(i) % p.words();
        if (idx == 2) {
          ASSERT_EQ(words[i] & ~int64_t{0x3fffff}, 0);  // 150 - 128 = 22 valid bits
        }
        if (idx >= 3) {
          ASSERT_EQ(words[i], 0);
        }
      }
    }
  }
}

TEST(PbWeights, OneBitCodesHaveNoZero) {
  const Tensor w = from_vector<float>({0.0f, -0.0f, 1.5f, -2.0f, 1e-30f, -1e-30f}, {1, 6});
  const PbWeights p = pb_preprocess(w, 1);
  EXPECT_EQ(pb_decode(p).to_vector<int32_t>(), (std::vector<int32_t>{1, 1, 1, -1, 1, -1}));
  const Tensor z = zeros({2, 5});
  const PbWeights pz = pb_preprocess(z, 1);
  EXPECT_EQ(pz.step, 1.0);
  EXPECT_EQ(pb_decode(pz).to_vector<int32_t>(), std::vector<int32_t>(10, 1));
  const PbWeights pz4 = pb_preprocess(z, 4);
  EXPECT_EQ(pz4.step, 1.0);
  EXPECT_EQ(pb_decode(pz4).to_vector<int32_t>(), std::vector<int32_t>(10, 0));
}

TEST(PbWeights, ClipSearchNeverIncreasesTheError) {
  for (int bits = 1; bits <= kPbMaxWeightBits; ++bits) {
    const Tensor w = random_matrix(13, 97, 10 + bits);
    const float* v = w.data<float>();
    auto err = [&](double step) {
      std::vector<int32_t> q(static_cast<size_t>(w.numel()));
      pb_weight_codes(v, w.numel(), bits, step, q.data());
      double e = 0.0;
      for (int64_t i = 0; i < w.numel(); ++i) e += std::pow(static_cast<double>(v[i]) - step * q[i], 2);
      return e;
    };
    const double plain = pb_weight_step(v, w.numel(), bits, false);
    const double searched = pb_weight_step(v, w.numel(), bits, true);
    EXPECT_LE(searched, plain);
    EXPECT_LE(err(searched), err(plain) * (1 + 1e-12)) << "bits " << bits;
  }
}

TEST(PbWeights, PlaneScalesAndConfig) {
  const PbWeights p = pb_preprocess(random_matrix(3, 10, 2), 4);
  EXPECT_EQ(p.plane_scale(0), p.step);
  EXPECT_EQ(p.plane_scale(3), 8 * p.step);
  EXPECT_EQ(p.plane_scale(4), -16 * p.step);
  EXPECT_THROW(p.plane_scale(5), Error);
  EXPECT_EQ(p.to(Device::cpu()).planes.to_vector<int64_t>(), p.planes.to_vector<int64_t>());
  EXPECT_EQ(pb_config_name({4, 16, true}), "w4a16");
  EXPECT_NO_THROW(check_pb_config({1, 2, true}, "layer"));
  EXPECT_THROW(check_pb_config({0, 16, true}, "layer"), Error);
  EXPECT_THROW(check_pb_config({9, 16, true}, "layer"), Error);
  EXPECT_THROW(check_pb_config({4, 1, true}, "layer"), Error);
  EXPECT_THROW(check_pb_config({4, 33, true}, "layer"), Error);
}

TEST(PbActivations, PlanesDecodeToTheCodes) {
  KernelScope scope;
  for (int bits : {2, 3, 8, 16, 32}) {
    const Tensor x = random_matrix(3, 130, 20 + bits);
    cpu::set_pb_kernel(PbKernel::portable);
    const PbActivations a = pb_quantize_activations(x, bits);
    for (PbKernel k : supported_kernels()) {  // the bit transpose has a path per kernel
      cpu::set_pb_kernel(k);
      const PbActivations ak = pb_quantize_activations(x, bits);
      ASSERT_EQ(ak.planes.to_vector<int64_t>(), a.planes.to_vector<int64_t>()) << cpu::pb_kernel_name(k);
      ASSERT_EQ(ak.scale.to_vector<double>(), a.scale.to_vector<double>()) << cpu::pb_kernel_name(k);
    }
    const std::vector<int32_t> codes = pb_activation_codes(x, bits).to_vector<int32_t>();
    const std::vector<int64_t> planes = a.planes.to_vector<int64_t>();
    const int64_t words = pb_words(130);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t k = 0; k < 130; ++k) {
        int64_t v = 0;
        for (int j = 0; j < bits; ++j) {
          const int64_t bit = (static_cast<uint64_t>(planes[(b * bits + j) * words + k / 64]) >> (k % 64)) & 1;
          v += j == bits - 1 ? -(bit << j) : bit << j;
        }
        ASSERT_EQ(v, codes[b * 130 + k]) << "bits " << bits;
      }
  }
}

TEST(PbGemm, EveryKernelGivesThePortableSums) {
  KernelScope scope;
  const int64_t rows = 13;
  for (int64_t words : {8, 24}) {
    for (int w_planes : {2, 3, 5, 9}) {
      for (int x_planes : {2, 3, 8, 17, 32}) {
        for (int64_t batch : {1, 3, 8}) {
          const auto w = random_words(rows * w_planes * words, static_cast<uint32_t>(words * 100 + w_planes));
          const auto x = random_words(batch * x_planes * words, static_cast<uint32_t>(x_planes * 10 + batch));
          std::vector<int64_t> ref(static_cast<size_t>(batch * rows)), acc(ref.size());
          cpu::pb_gemm(PbKernel::portable, w.data(), rows, w_planes, words, x.data(), batch, x_planes, ref.data());
          // A naive check of the portable path itself on one entry.
          if (words == 8 && batch == 1) {
            int64_t naive = 0;
            for (int64_t k = 0; k < words * 64; ++k) {
              int64_t q = 0, xq = 0;
              for (int p = 0; p < w_planes; ++p) {
                const int64_t bit = (w[static_cast<size_t>(p * words + k / 64)] >> (k % 64)) & 1;
                q += p == w_planes - 1 ? -(bit << p) : bit << p;
              }
              for (int j = 0; j < x_planes; ++j) {
                const int64_t bit = (x[static_cast<size_t>(j * words + k / 64)] >> (k % 64)) & 1;
                xq += j == x_planes - 1 ? -(bit << j) : bit << j;
              }
              naive += q * xq;
            }
            ASSERT_EQ(ref[0], naive);
          }
          for (PbKernel k : supported_kernels()) {
            cpu::pb_gemm(k, w.data(), rows, w_planes, words, x.data(), batch, x_planes, acc.data());
            ASSERT_EQ(acc, ref) << cpu::pb_kernel_name(k) << " words " << words << " planes " << w_planes << "x"
                                << x_planes << " batch " << batch;
          }
        }
      }
    }
  }
}

TEST(PbGemm, OneBitPathEqualsTheFullProduct) {
  const Tensor w = random_matrix(9, 700, 3);
  const PbWeights p = pb_preprocess(w, 1);
  const auto* wp = reinterpret_cast<const uint64_t*>(p.planes.data<int64_t>());
  for (int bits : {2, 5, 32}) {
    for (int64_t batch : {1, 3, 8}) {
      const PbActivations a = pb_quantize_activations(random_matrix(batch, 700, 4 + bits), bits);
      const auto* xp = reinterpret_cast<const uint64_t*>(a.planes.data<int64_t>());
      std::vector<int64_t> ref(static_cast<size_t>(batch * 9)), acc(ref.size());
      cpu::pb_gemm(PbKernel::portable, wp, 9, 2, p.words(), xp, batch, bits, ref.data());
      for (PbKernel k : supported_kernels()) {
        cpu::pb_gemm_1bit(k, wp, 9, p.words(), xp, batch, bits, acc.data());
        ASSERT_EQ(acc, ref) << cpu::pb_kernel_name(k) << " a" << bits << " batch " << batch;
      }
    }
  }
}

TEST(PbLinear, MatchesTheFloat64Reference) {
  KernelScope scope;
  const int64_t ks[] = {1, 63, 64, 65, 511, 512, 513, 1000, 4097};
  const int a_bits[] = {2, 3, 8, 16, 32};
  const int64_t batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 11};
  int i = 0;
  for (int64_t cols : ks) {
    for (int n = 1; n <= kPbMaxWeightBits; ++n, ++i) {
      const int64_t rows = cols > 1000 ? 5 : 7 + 2 * (i % 4);
      const int k = a_bits[i % 5];
      const int64_t batch = batches[(i * 7) % 9];
      const Tensor w = random_matrix(rows, cols, static_cast<uint32_t>(100 + i));
      const Tensor x = random_matrix(batch, cols, static_cast<uint32_t>(200 + i));
      const Tensor bias = i % 3 == 0 ? Tensor() : random_matrix(1, rows, static_cast<uint32_t>(300 + i)).view({rows});
      const PbWeights p = pb_preprocess(w, n, i % 2 == 0);
      const std::string what = "K " + std::to_string(cols) + " w" + std::to_string(n) + "a" + std::to_string(k) +
                               " batch " + std::to_string(batch);
      expect_matches_reference(p, x, k, bias, what);
      cpu::set_pb_kernel(PbKernel::portable);
      const std::vector<float> y_portable = pb_linear(p, x, k, bias).to_vector<float>();
      for (PbKernel kern : supported_kernels()) {
        cpu::set_pb_kernel(kern);
        ASSERT_EQ(pb_linear(p, x, k, bias).to_vector<float>(), y_portable) << what << " " << cpu::pb_kernel_name(kern);
      }
      cpu::set_pb_kernel(scope.saved);
    }
  }
}

TEST(PbLinear, ThreadCountDoesNotChangeTheResult) {
  // Large enough for the clip search (blocks of 4096 weights) and the rows to be split over threads.
  const Tensor w = random_matrix(257, 1000, 11), x = random_matrix(3, 1000, 12);
  const int saved = get_num_threads();
  set_num_threads(1);
  const PbWeights p1 = pb_preprocess(w, 4);
  const std::vector<float> y1 = pb_linear(p1, x, 8).to_vector<float>();
  set_num_threads(2);
  const PbWeights p2 = pb_preprocess(w, 4);
  const std::vector<float> y2 = pb_linear(p2, x, 8).to_vector<float>();
  set_num_threads(saved);
  EXPECT_EQ(p1.step, p2.step);
  EXPECT_EQ(p1.planes.to_vector<int64_t>(), p2.planes.to_vector<int64_t>());
  EXPECT_EQ(y1, y2);
}

TEST(PbLinear, ZeroAndNonFiniteRows) {
  const int64_t cols = 70;
  std::vector<float> xv = random_matrix(4, cols, 5).to_vector<float>();
  for (int64_t k = 0; k < cols; ++k) xv[static_cast<size_t>(cols + k)] = 0.0f;  // row 1 zero
  xv[static_cast<size_t>(2 * cols + 17)] = std::numeric_limits<float>::quiet_NaN();
  xv[static_cast<size_t>(3 * cols + 3)] = -std::numeric_limits<float>::infinity();
  const Tensor x = from_vector(xv, {4, cols});
  const Tensor bias = random_matrix(1, 5, 6).view({5});
  const PbWeights p = pb_preprocess(random_matrix(5, cols, 7), 4);
  const Tensor y = pb_linear(p, x, 16, bias);
  const std::vector<float> yv = y.to_vector<float>(), bv = bias.to_vector<float>();
  const std::vector<double> sv = pb_quantize_activations(x, 16).scale.to_vector<double>();
  EXPECT_EQ(sv[1], 0.0);
  EXPECT_TRUE(std::isnan(sv[2]));
  EXPECT_TRUE(std::isnan(sv[3]));
  for (int64_t r = 0; r < 5; ++r) {
    EXPECT_TRUE(std::isfinite(yv[r]));
    EXPECT_EQ(yv[5 + r], bv[r]);
    EXPECT_TRUE(std::isnan(yv[10 + r]));
    EXPECT_TRUE(std::isnan(yv[15 + r]));
  }
}

TEST(PbLinear, Int64ExtremesAreExact) {
  // 8-bit codes at -128 and 32-bit activations at -(2^31 - 1) over 4097 columns: |acc| near 2^50,
  // with the positive and negative plane pairs' partial sums far larger.
  const int64_t cols = 4097;
  const Tensor w = full({3, cols}, -2.0);
  const PbWeights p = pb_preprocess(w, 8, false);
  EXPECT_EQ(pb_decode(p).to_vector<int32_t>(), std::vector<int32_t>(3 * cols, -128));
  const Tensor x = full({2, cols}, -0.5);
  const int64_t acc = cols * 128 * ((int64_t{1} << 31) - 1);
  const float expect = static_cast<float>(static_cast<double>(acc) * (p.step * (0.5 / ((int64_t{1} << 31) - 1))));
  KernelScope scope;
  for (PbKernel k : supported_kernels()) {
    cpu::set_pb_kernel(k);
    EXPECT_EQ(pb_linear(p, x, 32).to_vector<float>(), std::vector<float>(6, expect)) << cpu::pb_kernel_name(k);
  }
  expect_matches_reference(p, x, 32, Tensor(), "extremes");
}

TEST(PbErrors, BadArgumentsThrow) {
  const Tensor w = random_matrix(4, 20, 8);
  EXPECT_THROW(pb_preprocess(w, 0), Error);
  EXPECT_THROW(pb_preprocess(w, 9), Error);
  EXPECT_THROW(pb_preprocess(w.view({80}), 4), Error);
  EXPECT_THROW(pb_preprocess(w.to(DType::f64), 4), Error);
  EXPECT_THROW(pb_preprocess(empty({1, kPbMaxCols}), 4), Error);
  std::vector<float> bad = w.to_vector<float>();
  bad[13] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(pb_preprocess(from_vector(bad, {4, 20}), 4), Error);
  bad[13] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(pb_preprocess(from_vector(bad, {4, 20}), 4), Error);
  try {
    pb_preprocess(from_vector(bad, {4, 20}), 4);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pb_preprocess"), std::string::npos) << e.what();
  }
  const PbWeights p = pb_preprocess(w, 4);
  EXPECT_THROW(pb_linear(p, random_matrix(2, 21, 9), 8), Error);
  EXPECT_THROW(pb_linear(p, random_matrix(2, 20, 9).view({40}), 8), Error);
  EXPECT_THROW(pb_linear(p, random_matrix(2, 20, 9), 1), Error);
  EXPECT_THROW(pb_linear(p, random_matrix(2, 20, 9), 33), Error);
  EXPECT_THROW(pb_linear(p, random_matrix(2, 20, 9), 8, zeros({5})), Error);
  EXPECT_THROW(pb_linear(p, random_matrix(2, 20, 9).to(DType::f64), 8), Error);
  EXPECT_THROW(pb_quantize_activations(random_matrix(2, 20, 9), 1), Error);
  PbWeights broken = p;
  broken.bits = 3;
  EXPECT_THROW(pb_linear(broken, random_matrix(2, 20, 9), 8), Error);
  EXPECT_THROW(cpu::pb_gemm(PbKernel::portable, nullptr, 1, 3, 8, nullptr, kPbMaxBatch + 1, 4, nullptr), Error);
}

}  // namespace
}  // namespace octet::quant
