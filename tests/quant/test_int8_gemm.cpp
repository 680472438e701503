// int8 GEMM (quant/cpu/int8_gemm.h): every supported path against a naive int64 product on random
// codes with -128/127 extremes, odd sizes, all transposes, padded leading dimensions and
// accumulation; the oneDNN saturation probe; bad arguments.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/int8_gemm.h"

namespace octet::quant {
namespace {

using cpu::Int8GemmPath;

std::vector<Int8GemmPath> supported_paths() {
  std::vector<Int8GemmPath> paths;
  for (Int8GemmPath p : {Int8GemmPath::reference, Int8GemmPath::avx2, Int8GemmPath::dnnl})
    if (cpu::int8_gemm_path_supported(p)) paths.push_back(p);
  return paths;
}

// Codes over the whole int8 range with the extremes -128 and 127 frequent.
std::vector<int8_t> random_codes(int64_t n, uint32_t seed) {
  std::vector<int8_t> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 1;
  for (auto& e : v) {
    s = s * 1664525u + 1013904223u;
    const uint32_t r = s >> 16;
    e = r % 5 == 0 ? -128 : r % 5 == 1 ? 127 : static_cast<int8_t>(static_cast<int32_t>(r & 0xff) - 128);
  }
  return v;
}

struct Problem {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad;  // extra leading-dimension elements
};

// C (+)= op(A) op(B) computed naively in int64 (exact).
std::vector<int32_t> naive(const Problem& p, const std::vector<int8_t>& a, int64_t lda, const std::vector<int8_t>& b,
                           int64_t ldb, const std::vector<int32_t>& c0, int64_t ldc, bool acc) {
  std::vector<int32_t> c = c0;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      int64_t s = acc ? c[i * ldc + j] : 0;
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const int64_t av = p.ta ? a[kk * lda + i] : a[i * lda + kk];
        const int64_t bv = p.tb ? b[j * ldb + kk] : b[kk * ldb + j];
        s += av * bv;
      }
      c[i * ldc + j] = static_cast<int32_t>(s);
    }
  return c;
}

void check_problem(const Problem& p, bool accumulate, uint32_t seed) {
  const int64_t lda = (p.ta ? p.m : p.k) + p.pad, ldb = (p.tb ? p.k : p.n) + p.pad, ldc = p.n + p.pad;
  const std::vector<int8_t> a = random_codes((p.ta ? p.k : p.m) * lda, seed);
  const std::vector<int8_t> b = random_codes((p.tb ? p.n : p.k) * ldb, seed + 1);
  std::vector<int32_t> c0(static_cast<size_t>(p.m * ldc));
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = static_cast<int32_t>(i * 7919 % 100000) - 50000;
  const std::vector<int32_t> want = naive(p, a, lda, b, ldb, c0, ldc, accumulate);
  for (Int8GemmPath path : supported_paths()) {
    std::vector<int32_t> c = c0;
    cpu::int8_gemm(path, p.ta, p.tb, p.m, p.n, p.k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
    // Padding columns of C stay untouched, the rest equals the exact product.
    ASSERT_EQ(c, want) << cpu::int8_gemm_path_name(path) << " M" << p.m << " N" << p.n << " K" << p.k << " ta" << p.ta
                       << " tb" << p.tb << " pad" << p.pad << " acc" << accumulate;
  }
}

TEST(Int8Gemm, EveryPathExactOnOddSizesAndExtremes) {
  const int64_t sizes[] = {1, 3, 17, 63, 129};
  uint32_t seed = 1;
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes)
        for (int t = 0; t < 4; ++t)
          check_problem({m, n, k, (t & 1) != 0, (t & 2) != 0, (m + n + k) % 3}, false, seed++);
}

// Past the avx2 kernel's blocks (72 rows, 256 columns, 512 codes of K), each with a partial last
// block and an odd K, in every transpose, with and without accumulation.
TEST(Int8Gemm, ExactAcrossBlocks) {
  for (int t = 0; t < 4; ++t) {
    check_problem({150, 530, 1101, (t & 1) != 0, (t & 2) != 0, 3}, false, 200 + t);
    check_problem({73, 257, 513, (t & 1) != 0, (t & 2) != 0, 0}, true, 300 + t);
  }
}

TEST(Int8Gemm, AccumulateAddsExactly) {
  for (int t = 0; t < 4; ++t) check_problem({37, 29, 300, (t & 1) != 0, (t & 2) != 0, 5}, true, 100 + t);
}

// All -128 or all 127: the largest sums (|sum| = K * 2^14), where a saturating kernel fails.
TEST(Int8Gemm, ExtremeConstantMatrices) {
  for (int8_t va : {int8_t{-128}, int8_t{127}})
    for (int8_t vb : {int8_t{-128}, int8_t{127}}) {
      const int64_t m = 5, n = 33, k = 4099;
      std::vector<int8_t> a(m * k, va), b(k * n, vb);
      for (Int8GemmPath path : supported_paths()) {
        std::vector<int32_t> c(m * n, 0);
        cpu::int8_gemm(path, false, false, m, n, k, a.data(), k, b.data(), n, c.data(), n, false);
        for (int32_t v : c) ASSERT_EQ(v, int64_t{va} * vb * k) << cpu::int8_gemm_path_name(path);
      }
    }
}

TEST(Int8Gemm, EmptyAndZeroK) {
  std::vector<int8_t> a(6, 1), b(6, 1);
  std::vector<int32_t> c(6, 9);
  cpu::int8_gemm(false, false, 2, 3, 0, a.data(), 1, b.data(), 3, c.data(), 3, true);
  EXPECT_EQ(c, std::vector<int32_t>(6, 9));
  cpu::int8_gemm(false, false, 2, 3, 0, a.data(), 1, b.data(), 3, c.data(), 3, false);
  EXPECT_EQ(c, std::vector<int32_t>(6, 0));
  cpu::int8_gemm(false, false, 0, 3, 2, a.data(), 2, b.data(), 3, c.data(), 3, false);
}

// With VNNI oneDNN is exact and chosen; a CPU without VNNI falls back to avx2 or the reference.
TEST(Int8Gemm, ActivePathIsSupported) {
  EXPECT_TRUE(cpu::int8_gemm_path_supported(cpu::int8_gemm_path()));
  EXPECT_TRUE(cpu::int8_gemm_path_supported(Int8GemmPath::reference));
  EXPECT_EQ(cpu::int8_gemm_path_supported(Int8GemmPath::dnnl), cpu::dnnl_int8_gemm_exact());
  Int8GemmPath prev = cpu::set_int8_gemm_path(Int8GemmPath::reference);
  EXPECT_EQ(cpu::int8_gemm_path(), Int8GemmPath::reference);
  cpu::set_int8_gemm_path(prev);
  if (!cpu::dnnl_int8_gemm_exact()) {
    EXPECT_THROW(cpu::set_int8_gemm_path(Int8GemmPath::dnnl), Error);
  }
}

// ctest runs the GEMM and conv suites once more as "int8_without_vnni" with ONEDNN_MAX_CPU_ISA=AVX512_CORE
// (tests/CMakeLists.txt): oneDNN then saturates, the probe must see it and the avx2 kernel (or,
// without AVX2, the reference loops) must serve every GEMM and conv (the other tests check the
// results).
TEST(Int8Gemm, ProbeSeesSaturationWithoutVnni) {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (isa == nullptr || std::string(isa) != "AVX512_CORE")
    GTEST_SKIP() << "runs in the ctest int8_without_vnni (ONEDNN_MAX_CPU_ISA=AVX512_CORE)";
  EXPECT_FALSE(cpu::dnnl_int8_gemm_exact());
  EXPECT_EQ(cpu::int8_gemm_path(), cpu::int8_gemm_path_supported(Int8GemmPath::avx2) ? Int8GemmPath::avx2
                                                                                    : Int8GemmPath::reference);
  EXPECT_THROW(cpu::set_int8_gemm_path(Int8GemmPath::dnnl), Error);
}

TEST(Int8Gemm, RejectsBadArguments) {
  std::vector<int8_t> a(16), b(16);
  std::vector<int32_t> c(16);
  EXPECT_THROW(cpu::int8_gemm(false, false, -1, 2, 2, a.data(), 2, b.data(), 2, c.data(), 2, false), Error);
  EXPECT_THROW(cpu::int8_gemm(false, false, 2, 2, 3, a.data(), 2, b.data(), 2, c.data(), 2, false), Error);  // lda < K
  EXPECT_THROW(cpu::int8_gemm(false, true, 2, 4, 2, a.data(), 2, b.data(), 1, c.data(), 4, false), Error);   // ldb < K
  EXPECT_THROW(cpu::int8_gemm(false, false, 2, 4, 2, a.data(), 2, b.data(), 4, c.data(), 3, false), Error);  // ldc < N
  try {
    cpu::int8_gemm(false, false, 2, 4, 2, a.data(), 2, b.data(), 4, c.data(), 3, false);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int8_gemm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace octet::quant
