// The bf16 tile products (core/cpu/bf16_tile.h) attention's bf16 path runs on: the packings against
// their definitions, and the AVX512-BF16 kernel against the plain loop in the same order, on odd
// sizes (partial register blocks and masked columns, odd k), with and without accumulation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/cpu/bf16_tile.h"
#include "core/generator.h"

namespace octet::cpu {
namespace {

std::vector<BFloat16> random_bf16(int64_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<BFloat16> out(static_cast<size_t>(n));
  for (auto& v : out)
    v = BFloat16(static_cast<float>(uniform_double(philox_at(g.seed(), g.advance(1), 0)[0], 0) * 4 - 2));
  return out;
}

float lo(uint32_t w) { return std::bit_cast<float>(w << 16); }
float hi(uint32_t w) { return std::bit_cast<float>(w & 0xffff0000u); }

TEST(Bf16Tile, PackingsHoldPairsAlongK) {
  for (int64_t k : {1, 2, 7, 64}) {
    const int64_t n = 19, ld = packed_ld(n);
    EXPECT_EQ(ld, 32);
    std::vector<BFloat16> x = random_bf16(k * n, 1);  // [k, n]
    std::vector<uint32_t> rows(packed_words(k, n)), tr(packed_words(k, n));
    pack_rows(x.data(), k, n, n, rows.data(), ld);
    std::vector<BFloat16> xt(static_cast<size_t>(n * k));  // [n, k] = x^T
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) xt[j * k + i] = x[i * n + j];
    pack_transposed(xt.data(), n, k, k, tr.data(), ld);
    std::vector<float> xf(x.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = float(x[i]) * 1.0001f;  // rounds back to x
    std::vector<uint32_t> rounded(packed_words(k, n));
    pack_rows_rounded(xf.data(), k, n, n, rounded.data(), ld);
    for (int64_t p = 0; p < (k + 1) / 2; ++p)
      for (int64_t j = 0; j < n; ++j) {
        const uint32_t w = rows[p * ld + j];
        EXPECT_EQ(lo(w), float(x[2 * p * n + j]));
        EXPECT_EQ(hi(w), 2 * p + 1 < k ? float(x[(2 * p + 1) * n + j]) : 0.0f);
        EXPECT_EQ(tr[p * ld + j], w) << "k " << k << " p " << p << " j " << j;
        EXPECT_EQ(rounded[p * ld + j], w);
      }
  }
}

TEST(Bf16Tile, KernelMatchesPlainLoopOnOddSizes) {
  if (!bf16_tiles_supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  for (int64_t m : {1, 5, 8, 13, 32})
    for (int64_t n : {1, 15, 16, 17, 33, 64})
      for (int64_t k : {1, 2, 9, 64, 65}) {
        const int64_t lda = k + 3, ldb = packed_ld(n) + 16, ldc = n + 2;
        std::vector<BFloat16> a = random_bf16(m * lda, 2), bx = random_bf16(k * n, 3);
        std::vector<uint32_t> b(static_cast<size_t>((k + 1) / 2 * ldb));
        pack_rows(bx.data(), k, n, n, b.data(), ldb);
        for (bool accumulate : {false, true}) {
          std::vector<float> c0(static_cast<size_t>(m * ldc));
          for (size_t i = 0; i < c0.size(); ++i) c0[i] = 0.25f * static_cast<float>(i % 7);
          std::vector<float> want = c0, got = c0;
          gemm_bf16_packed_plain(m, n, k, 0.5f, a.data(), lda, b.data(), ldb, accumulate, want.data(), ldc);
          gemm_bf16_packed(m, n, k, 0.5f, a.data(), lda, b.data(), ldb, accumulate, got.data(), ldc);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const float w = want[i * ldc + j], g = got[i * ldc + j];
              if (j >= n) {  // past the columns: untouched
                EXPECT_EQ(g, c0[i * ldc + j]);
                continue;
              }
              // The same products summed in the same order: equal up to the instruction's own rounding
              // of the pair sum (it may add a pair before rounding once).
              EXPECT_NEAR(g, w, 1e-5f * (1.0f + std::abs(w))) << m << "x" << n << "x" << k << " at " << i << "," << j;
            }
        }
      }
}

}  // namespace
}  // namespace octet::cpu
