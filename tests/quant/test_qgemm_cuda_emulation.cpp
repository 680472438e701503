// The CUDA zero-point GEMM run on the CPU: quant/cuda/qgemm.cu's per-element
// functions (quant/cuda/qgemm_kernels.h) over every element: the operands'
// padded s8 copies and row sums, the raw product by cuBLASLt's definition
// ("TN", checking its layout rules) and by the DP4A tiles of
// quant/cuda/int8_dp4a.h phase by phase over garbage-filled tiles, the
// zero-point fold, the row quantizer's parameters and codes and qlinear's
// output. Every int32 sum must equal qgemm_reference, the codes and outputs the
// CPU's, bit for bit, on odd sizes. The launches, cuBLASLt and the intrinsics
// need a GPU (tests/cuda/test_cuda_qgemm.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/qgemm.h"
#include "quant/cuda/int8_dp4a.h"
#include "quant/cuda/qgemm_kernels.h"
#include "quant/qgemm.h"
#include "tests/quant/same_bytes.h"

namespace octet::quant {
namespace {

namespace qg = cuda::qg;
namespace ops = cuda::ops;

// Streams the arguments into one string (a case's name in messages).
template <class... T>
std::string cat(const T&... v) {
  std::ostringstream os;
  (os << ... << v);
  return os.str();
}

using testing::same_bytes;

std::vector<uint8_t> codes(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& c : v) c = static_cast<uint8_t>(rng());
  if (n > 2) v[0] = 0, v[1] = 255, v[2] = 128;  // the extremes of both types
  return v;
}

// One host DP4A GEMM through int8_dp4a.h's phases (as
// tests/quant/test_int8_cuda_emulation.cpp).
void emulate_dp4a(const qg::QgemmDp4aOps& op) {
  const ops::Dp4aGrid grid = ops::dp4a_grid(op, op.words());
  for (int64_t y = 0; y < grid.y; ++y)
    for (int64_t x = 0; x < grid.x; ++x) {
      const ops::Dp4aBlock blk = ops::dp4a_block(op, x, y, 0, 0, op.words(), 1);
      int32_t acc[ops::kTileThreads][4][4] = {};
      ops::Dp4aTile tile;
      std::memset(&tile, 0xa5, sizeof tile);
      for (int64_t u0 = blk.u_begin; u0 < blk.u_end; u0 += ops::kTileWords) {
        for (int t = 0; t < ops::kTileThreads; ++t) ops::dp4a_load(op, blk, u0, t, tile);
        for (int t = 0; t < ops::kTileThreads; ++t) ops::dp4a_accumulate(tile, t, acc[t]);
      }
      for (int t = 0; t < ops::kTileThreads; ++t) ops::dp4a_store(op, blk, t, acc[t]);
    }
}

// cuda::qgemm on the host: operand copies and row sums, the raw product by
// cuBLASLt's definition
// ("TN", b' as its A) or by the DP4A tiles, then the fold.
std::vector<int32_t> emulate_qgemm(int64_t m, int64_t n, int64_t k, QType ta, const uint8_t* a,
                                   const std::vector<int32_t>& za, QType tb, const uint8_t* b, int32_t zb, bool dp4a) {
  const bool ua = ta == QType::u8, ub = tb == QType::u8;
  const int64_t kp = qg::round_up(k, qg::kRowAlign), np = qg::round_up(n, qg::kRowsAlign);
  std::vector<int8_t> as(static_cast<size_t>(m * kp), int8_t{-91}), bs(static_cast<size_t>(np * kp), int8_t{-91});
  std::vector<int32_t> sa(static_cast<size_t>(m), -7), sb(static_cast<size_t>(n), -7);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t t = 0; t < kp; ++t) as[static_cast<size_t>(r * kp + t)] = qg::qg_padded(a, m, k, k, ua, r, t);
    int32_t s = 0;
    for (int64_t t = 0; t < k; ++t) s += qg::qg_raw(a, ua, r * k + t);
    sa[static_cast<size_t>(r)] = s;
  }
  for (int64_t r = 0; r < np; ++r) {
    for (int64_t t = 0; t < kp; ++t) bs[static_cast<size_t>(r * kp + t)] = qg::qg_padded(b, n, k, k, ub, r, t);
    if (r >= n) continue;
    int32_t s = 0;
    for (int64_t t = 0; t < k; ++t) s += qg::qg_raw(b, ub, r * k + t);
    sb[static_cast<size_t>(r)] = s;
  }
  std::vector<int32_t> p(static_cast<size_t>(m * np), -12345);
  const ops::Int8Gemm g{np, m, kp, kp, kp, np};
  EXPECT_TRUE(ops::follows_int8_gemm_rules(g));
  if (dp4a) {
    emulate_dp4a(qg::QgemmDp4aOps{{}, as.data(), bs.data(), m, n, kp, p.data(), np});
  } else {  // C[j*ldc + i] = sum_t A[i*lda + t] B[j*ldb + t], A = b', B = a'
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        int32_t s = 0;
        for (int64_t t = 0; t < g.k; ++t)
          s += int32_t{bs[static_cast<size_t>(i * g.lda + t)]} * as[static_cast<size_t>(j * g.ldb + t)];
        p[static_cast<size_t>(j * g.ldc + i)] = s;
      }
  }
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  for (int64_t e = 0; e < m * n; ++e) {
    const int64_t i = e / n, j = e - i * n;
    c[static_cast<size_t>(e)] = qg::qg_fold(p[static_cast<size_t>(i * np + j)], za[static_cast<size_t>(i)], zb,
                                            sa[static_cast<size_t>(i)], sb[static_cast<size_t>(j)], k, ua, ub);
  }
  return c;
}

TEST(QgemmKernelEmulation, EveryPathMatchesReference) {
  for (QType ta : {QType::u8, QType::s8})
    for (QType tb : {QType::u8, QType::s8})
      for (int64_t m : {1, 3, 70})
        for (int64_t n : {1, 5, 8, 13})
          for (int64_t k : {1, 3, 16, 17, 100}) {
            const std::vector<uint8_t> a = codes(m * k, 3 * m + k), b = codes(n * k, 5 * n + k);
            std::vector<int32_t> za(static_cast<size_t>(m));
            for (int64_t i = 0; i < m; ++i)
              za[static_cast<size_t>(i)] = static_cast<int32_t>((37 * i + 11) % 256) + qmin(ta);
            const int32_t zb = tb == QType::u8 ? 131 : -5;
            std::vector<int32_t> want(static_cast<size_t>(m * n));
            qgemm_reference(m, n, k, ta, a.data(), k, za.data(), tb, b.data(), k, zb, want.data(), n);
            for (bool dp4a : {false, true}) {
              const std::vector<int32_t> got = emulate_qgemm(m, n, k, ta, a.data(), za, tb, b.data(), zb, dp4a);
              EXPECT_TRUE(same_bytes(got.data(), want.data(), m * n, 4,
                                     cat(dp4a ? "dp4a" : "cublaslt", " m=", m, " n=", n, " k=", k,
                                         ta == QType::u8 ? " u8" : " s8", tb == QType::u8 ? "xu8" : "xs8")));
            }
          }
}

TEST(QgemmKernelEmulation, FoldAtTheLargestK) {
  // k = 33025 codes of 255 against 255 with zero points 0: the largest sum an
  // int32 holds.
  constexpr int64_t k = 33025;
  const int64_t s = 255 * k;
  const int64_t p = (255 - 128) * int64_t{255 - 128} * k;  // a' = b' = 127
  EXPECT_EQ(qg::qg_fold(static_cast<int32_t>(p), 0, 0, static_cast<int32_t>(s), static_cast<int32_t>(s), k, true, true),
            static_cast<int32_t>(255 * 255 * k));
}

TEST(QgemmKernelEmulation, RowParamsAndCodesMatchCpu) {
  const float cases[][2] = {{0.0f, 0.0f},  {-1.0f, 1.0f},    {0.5f, 3.0f},    {-3.0f, -0.5f},  {-1e-30f, 1e-30f},
                            {-0.0f, 0.0f}, {1e-45f, 2e-45f}, {-1e30f, 3e30f}, {-2.0f, 253.0f}, {-255.0f, 0.0f}};
  for (const auto& c : cases) {
    const QParams want = choose_qparams(c[0], c[1], QType::u8);
    const qg::QgRowParams got = qg::qg_row_params(c[0], c[1]);
    EXPECT_EQ(std::memcmp(&got.scale, &want.scale, 4), 0)
        << c[0] << " " << c[1] << ": " << got.scale << " vs " << want.scale;
    EXPECT_EQ(got.zero_point, want.zero_point) << c[0] << " " << c[1];
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> ud(c[0] * 1.1f - 1.0f, c[1] * 1.1f + 1.0f);
    for (int i = 0; i < 200; ++i) {
      const float x = ud(rng);
      EXPECT_EQ(int32_t{qg::qg_code(x, got)}, quantize_value(x, want)) << x;
    }
  }
}

// quantize_rows_kernel on the host: block b = row b; the min, max and non-finite flag over its
// threads (exact in any order), then the parameters and every code.
void emulate_quantize_rows(const float* x, int64_t batch, int64_t cols, uint8_t* codes, float* scale, int32_t* zp) {
  for (int64_t b = 0; b < batch; ++b) {
    const float* xr = x + b * cols;
    float lo = 0.0f, hi = 0.0f;
    bool bad = false;
    for (int t = 0; t < qg::kThreads; ++t)
      for (int64_t c = t; c < cols; c += qg::kThreads) {
        if (!std::isfinite(xr[c]))
          bad = true;
        else
          lo = std::fmin(lo, xr[c]), hi = std::fmax(hi, xr[c]);
      }
    const qg::QgRowParams p =
        bad ? qg::qg_row_params(0.0f, std::numeric_limits<float>::quiet_NaN()) : qg::qg_row_params(lo, hi);
    scale[b] = p.scale, zp[b] = p.zero_point;
    for (int64_t c = 0; c < cols; ++c) codes[b * cols + c] = qg::qg_code(xr[c], p);
  }
}

// Rows of N(0, 1) floats with the cases choose_qparams distinguishes: all zeros, all positive, all
// negative, a tiny range (scale underflow), a NaN, an infinity.
std::vector<float> rows_of(int64_t batch, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch * cols));
  for (float& v : x) v = nd(rng);
  for (int64_t b = 1; b < batch; ++b)
    for (int64_t c = 0; c < cols; ++c) {
      float& v = x[static_cast<size_t>(b * cols + c)];
      const int kind = static_cast<int>(b % 7);
      if (kind == 1) v = 0.0f;
      if (kind == 2) v = std::fabs(v) + 0.5f;
      if (kind == 3) v = -std::fabs(v) * 100.0f;
      if (kind == 4) v = v * 1e-44f;
      if (kind == 5 && c == cols / 2) v = std::numeric_limits<float>::quiet_NaN();
      if (kind == 6 && c == 0) v = -std::numeric_limits<float>::infinity();
    }
  return x;
}

TEST(QgemmKernelEmulation, RowQuantizerMatchesCpu) {
  for (int64_t cols : {1, 3, 255, 257, 1000})
    for (int64_t batch : {1, 7, 15}) {
      const std::vector<float> x = rows_of(batch, cols, 31 * cols + batch);
      std::vector<uint8_t> gc(static_cast<size_t>(batch * cols), 0xa5), wc(gc.size(), 0x5a);
      std::vector<float> gs(static_cast<size_t>(batch)), ws(gs.size());
      std::vector<int32_t> gz(gs.size(), -1), wz(gs.size(), -2);
      emulate_quantize_rows(x.data(), batch, cols, gc.data(), gs.data(), gz.data());
      cpu::quantize_rows_u8(x.data(), batch, cols, wc.data(), ws.data(), wz.data());
      const std::string what = cat("cols=", cols, " batch=", batch);
      EXPECT_TRUE(same_bytes(gc.data(), wc.data(), batch * cols, 1, what + " codes"));
      EXPECT_TRUE(same_bytes(gs.data(), ws.data(), batch, 4, what + " scales"));
      EXPECT_TRUE(same_bytes(gz.data(), wz.data(), batch, 4, what + " zero points"));
    }
}

// Row quantizer, product (both paths) and output together against the CPU's qlinear.
TEST(QgemmKernelEmulation, QLinearMatchesCpu) {
  for (int64_t rows : {1, 5, 8, 19})
    for (int64_t cols : {1, 16, 17, 300})
      for (int64_t batch : {1, 8, 11}) {
        Tensor wf = from_vector(rows_of(1, rows * cols, 3 * rows + cols), {rows, cols});
        const QLinearWeights w = qlinear_prepare(wf);
        const std::vector<float> xv = rows_of(batch, cols, 5 * batch + cols);
        Tensor x = from_vector(xv, {batch, cols});
        Tensor bias = from_vector(rows_of(1, rows, 9), {rows});
        std::vector<uint8_t> codes(static_cast<size_t>(batch * cols));
        std::vector<float> scale(static_cast<size_t>(batch));
        std::vector<int32_t> zp(static_cast<size_t>(batch));
        emulate_quantize_rows(xv.data(), batch, cols, codes.data(), scale.data(), zp.data());
        const auto* wc = reinterpret_cast<const uint8_t*>(w.codes.data<int8_t>());
        for (bool dp4a : {false, true})
          for (bool with_bias : {false, true}) {
            const std::vector<int32_t> acc =
                emulate_qgemm(batch, rows, cols, QType::u8, codes.data(), zp, QType::s8, wc, 0, dp4a);
            std::vector<float> y(acc.size());
            for (int64_t e = 0; e < batch * rows; ++e)
              y[static_cast<size_t>(e)] =
                  qg::qg_output(acc[static_cast<size_t>(e)], scale[static_cast<size_t>(e / rows)], w.w.scale,
                                with_bias ? bias.data<float>() : nullptr, e % rows);
            Tensor want = with_bias ? qlinear(w, x, bias) : qlinear(w, x);
            EXPECT_TRUE(same_bytes(y.data(), want.data<float>(), batch * rows, 4,
                                   cat("rows=", rows, " cols=", cols, " batch=", batch, dp4a ? " dp4a" : " cublaslt",
                                       with_bias ? " with bias" : "")));
          }
      }
}

}  // namespace
}  // namespace octet::quant
