// The bf16 tile products of core/cpu/bf16_tile.h: a register block of up to 8 rows of A by 32
// columns of B (16 accumulators) walks k a pair at a time, one vdpbf16ps per row and 16 columns,
// each A pair broadcast from memory. Partial blocks store through masks.
#include "core/cpu/bf16_tile.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <utility>

#include "core/cpu/bf16.h"
#include "core/cpu/isa.h"
#include "core/error.h"

#ifdef OCTET_CPU_X86
#include "core/cpu/x86_intrin.h"
#endif

namespace octet::cpu {

namespace {

uint16_t bits_of(BFloat16 v) { return v.bits; }

// A's pair (k0, k0 + 1) of a row as one word, or its last element alone (high half 0) when k0 is k's
// last index.
OCTET_SIMD_INLINE uint32_t a_pair(const BFloat16* row, int64_t k0, int64_t k) {
  if (k0 + 1 < k) {
    uint32_t w;
    std::memcpy(&w, row + k0, 4);
    return w;
  }
  return bits_of(row[k0]);
}

// Pairs of rows of X [k, n] into words, each element's bf16 bits from bits(x).
template <typename X, typename Bits>
OCTET_SIMD_INLINE void pack_pairs_of_rows(const X* x, int64_t k, int64_t n, int64_t ldx, uint32_t* out, int64_t ld,
                                          Bits bits) {
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    const X* lo = x + 2 * p * ldx;
    uint32_t* o = out + p * ld;
    if (2 * p + 1 < k) {
      const X* hi = lo + ldx;
      for (int64_t j = 0; j < n; ++j) o[j] = bits(lo[j]) | (static_cast<uint32_t>(bits(hi[j])) << 16);
    } else {
      for (int64_t j = 0; j < n; ++j) o[j] = bits(lo[j]);
    }
  }
}

}  // namespace

void pack_rows(const BFloat16* x, int64_t k, int64_t n, int64_t ldx, uint32_t* out, int64_t ld) {
  const auto* in = reinterpret_cast<const uint16_t*>(x);
  simd_dispatch([=] { pack_pairs_of_rows(in, k, n, ldx, out, ld, [](uint16_t v) { return v; }); });
}

void pack_transposed(const BFloat16* x, int64_t n, int64_t k, int64_t ldx, uint32_t* out, int64_t ld) {
  constexpr int64_t kBlock = 16;  // a block of rows by pairs at a time, so reads and writes stay in cache
  const int64_t pairs = (k + 1) / 2;
  for (int64_t j0 = 0; j0 < n; j0 += kBlock)
    for (int64_t p0 = 0; p0 < pairs; p0 += kBlock)
      for (int64_t j = j0; j < std::min(n, j0 + kBlock); ++j)
        for (int64_t p = p0; p < std::min(pairs, p0 + kBlock); ++p) out[p * ld + j] = a_pair(x + j * ldx, 2 * p, k);
}

void pack_rows_rounded(const float* x, int64_t k, int64_t n, int64_t ldx, uint32_t* out, int64_t ld) {
  simd_dispatch([=] {
    pack_pairs_of_rows(x, k, n, ldx, out, ld, [](float v) { return bf16_bits(std::bit_cast<uint32_t>(v)); });
  });
}

void gemm_bf16_packed_plain(int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda,
                            const uint32_t* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  auto half = [](uint32_t w, int h) { return std::bit_cast<float>((h ? w & 0xffff0000u : w << 16)); };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < (k + 1) / 2; ++p) {  // the high halves first, as vdpbf16ps adds them
        const uint32_t aw = a_pair(a + i * lda, 2 * p, k), bw = b[p * ldb + j];
        sum += half(aw, 1) * half(bw, 1);
        sum += half(aw, 0) * half(bw, 0);
      }
      c[i * ldc + j] = alpha * sum + (accumulate ? c[i * ldc + j] : 0.0f);
    }
}

#ifdef OCTET_CPU_X86

#define OCTET_TARGET_BF16 __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

bool bf16_tiles_supported() {
  static const bool ok = isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bf16");
  return ok;
}

namespace {

// R rows of A by NV x 16 columns of B (the last vector's `cols` beyond 16 (NV - 1) columns stored).
template <int R, int NV>
OCTET_TARGET_BF16 void block(int64_t k, float alpha, const BFloat16* a, int64_t lda, const uint32_t* b, int64_t ldb,
                             bool accumulate, float* c, int64_t ldc, int64_t cols) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + p * ldb + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a_pair(a + r * lda, 2 * p, k)));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const int64_t left = cols - 16 * v;
    const __mmask16 mask = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* out = c + r * ldc + 16 * v;
      __m512 val = _mm512_mul_ps(scale, acc[r][v]);
      if (accumulate) val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(mask, out));
      _mm512_mask_storeu_ps(out, mask, val);
    }
  }
}

using BlockFn = void (*)(int64_t, float, const BFloat16*, int64_t, const uint32_t*, int64_t, bool, float*, int64_t,
                         int64_t);

template <int NV, int... R>
constexpr std::array<BlockFn, sizeof...(R)> blocks(std::integer_sequence<int, R...>) {
  return {&block<R + 1, NV>...};
}

}  // namespace

void gemm_bf16_packed(int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda, const uint32_t* b,
                      int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  static constexpr std::array<BlockFn, 8> one = blocks<1>(std::make_integer_sequence<int, 8>{});
  static constexpr std::array<BlockFn, 8> two = blocks<2>(std::make_integer_sequence<int, 8>{});
  OCTET_CHECK(bf16_tiles_supported(), "gemm_bf16_packed: this CPU has no AVX512-BF16");
  OCTET_CHECK(ldb >= packed_ld(n), "gemm_bf16_packed: packed B rows of ", ldb, " words, need ", packed_ld(n));
  for (int64_t j = 0; j < n; j += 32) {
    const int64_t cols = std::min<int64_t>(32, n - j);
    for (int64_t i = 0; i < m; i += 8) {
      const int64_t rows = std::min<int64_t>(8, m - i);
      (cols > 16 ? two : one)[rows - 1](k, alpha, a + i * lda, lda, b + j, ldb, accumulate, c + i * ldc + j, ldc, cols);
    }
  }
}

#else

bool bf16_tiles_supported() { return false; }

void gemm_bf16_packed(int64_t, int64_t, int64_t, float, const BFloat16*, int64_t, const uint32_t*, int64_t, bool,
                      float*, int64_t) {
  OCTET_FAIL("gemm_bf16_packed: built without x86 AVX-512 kernels");
}

#endif

}  // namespace octet::cpu
