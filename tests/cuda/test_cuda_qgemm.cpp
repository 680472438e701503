// CUDA zero-point GEMM against the CPU (quant/cuda/qgemm.cu): qlinear bit for
// bit on many shapes (odd K, batch 1..8 and 11, NaN, infinite and zero rows),
// and the raw qgemm for every operand type pair by cuBLASLt and by the DP4A
// fallback against qgemm_reference. Skipped without a GPU;
// OCTET_CUDA_TESTS_ON_CPU=1 runs the qlinear test CPU against CPU (a check of
// the test only).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/qgemm.h"
#include "tests/cuda/parity.h"
#ifdef OCTET_TESTS_WITH_CUDA
#include "quant/cuda/qgemm.h"
#endif

namespace octet::quant {
namespace {

using testing::bits_equal;
using testing::gpu;

// Streams the arguments into one string (a case's name in messages).
template <class... T>
std::string cat(const T&... v) {
  std::ostringstream os;
  (os << ... << v);
  return os.str();
}

Tensor inputs(int64_t rows, int64_t cols, uint64_t seed, bool special = false) {
  return testing::quant_rows_input(rows, cols, seed, special);
}

class CudaQgemm : public testing::CudaParityTest {};

TEST_F(CudaQgemm, QLinearEqualsCpu) {
  for (int64_t rows : {1, 5, 8, 37})
    for (int64_t cols : {1, 3, 16, 17, 100, 1000})
      for (int64_t batch : {1, 3, 8, 11}) {
        const QLinearWeights w = qlinear_prepare(inputs(rows, cols, rows + cols));
        const QLinearWeights wg = w.to(gpu());
        Tensor x = inputs(batch, cols, 3 * batch + cols, true), bias = inputs(1, rows, 5).view({rows});
        const std::string what = cat("rows=", rows, " cols=", cols, " batch=", batch);
        EXPECT_TRUE(bits_equal(qlinear(wg, x.to(gpu()), bias.to(gpu())), qlinear(w, x, bias), what + " with bias"));
        EXPECT_TRUE(bits_equal(qlinear(wg, x.to(gpu())), qlinear(w, x), what));
      }
}

#ifdef OCTET_TESTS_WITH_CUDA
// Seeded codes of a type as a tensor [rows, cols], with the extremes 0/255 (u8)
// and -128/127 (s8).
Tensor codes(int64_t rows, int64_t cols, QType t, uint64_t seed) {
  Generator g(seed);
  Tensor u = empty({rows, cols}, DType::f64);
  u.uniform_(0.0, 256.0, &g);
  std::vector<double> v = u.to_vector<double>();
  if (!v.empty()) v[0] = 255.0;
  if (v.size() > 1) v[1] = 0.0;
  for (double& e : v) e = std::floor(e) + qmin(t);
  return from_vector(v, {rows, cols}).to(t == QType::u8 ? DType::u8 : DType::i8);
}

TEST_F(CudaQgemm, QgemmEveryTypeAndPathEqualsReference) {
  if (testing::cpu_selftest()) GTEST_SKIP() << "calls the CUDA kernels directly";
  for (QType ta : {QType::u8, QType::s8})
    for (QType tb : {QType::u8, QType::s8})
      for (int64_t m : {1, 4, 7, 70})
        for (int64_t n : {1, 6, 8, 64})
          for (int64_t k : {1, 5, 16, 33, 1000}) {
            Tensor a = codes(m, k, ta, m + k), b = codes(n, k, tb, 7 * n + k);
            std::vector<int32_t> za(static_cast<size_t>(m));
            for (int64_t i = 0; i < m; ++i)
              za[static_cast<size_t>(i)] = static_cast<int32_t>((29 * i + 3) % 256) + qmin(ta);
            const int32_t zb = tb == QType::u8 ? 120 : 3;
            Tensor want = empty({m, n}, DType::i32);
            qgemm_reference(m, n, k, ta, a.raw_data(), k, za.data(), tb, b.raw_data(), k, zb, want.data<int32_t>(), n);
            Tensor zag = from_vector(za, {m}).to(gpu()), ag = a.to(gpu()), bg = b.to(gpu());
            std::vector<int32_t> bv = b.to(DType::i32).to_vector<int32_t>(), sv(static_cast<size_t>(n), 0);
            for (int64_t e = 0; e < n * k; ++e) sv[static_cast<size_t>(e / k)] += bv[static_cast<size_t>(e)];
            Tensor sums = from_vector(sv, {n}).to(gpu());
            const std::string what =
                cat("m=", m, " n=", n, " k=", k, ta == QType::u8 ? " u8" : " s8", tb == QType::u8 ? "xu8" : "xs8");
            for (cuda::QgemmPath path : {cuda::QgemmPath::automatic, cuda::QgemmPath::dp4a}) {
              const std::string p = path == cuda::QgemmPath::dp4a ? " dp4a" : " auto";
              EXPECT_TRUE(bits_equal(cuda::qgemm(ag, zag, ta, bg, zb, tb, sums, path), want, what + p));
              EXPECT_TRUE(bits_equal(cuda::qgemm(ag, zag, ta, bg, zb, tb, Tensor(), path), want, what + p + " sums"));
            }
          }
}
#endif

}  // namespace
}  // namespace octet::quant
