// The AVX2 int8 GEMM path (quant/cpu/int8_gemm.h), exact on CPUs without VNNI: the codes are
// widened to int16 while packing, and vpmaddwd multiplies pairs of them into int32 sums. An int8
// product is at most 2^14 in magnitude, a pair sum at most 2^15, so no step saturates (unlike
// vpmaddubsw's int16 pair sums, which is why oneDNN's s8s8 GEMM is inexact there).
//
// Layout, as in the usual packed GEMM: op(B) is packed per K block into panels of kNr columns,
// each k pair of a column adjacent ([pair][column][2] int16, so one 256-bit load is 8 columns x 2
// k), op(A) into panels of kMr rows ([pair][row][2] int16, one 32-bit broadcast per row). The
// kMr x kNr tile of C stays in 12 ymm accumulators for the whole K block.
#include "quant/cpu/int8_gemm_detail.h"

#ifdef OCTET_CPU_X86

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel.h"

namespace octet::quant::cpu::detail {

namespace {

constexpr int64_t kMr = 6, kNr = 16;
// A K block is kKc codes (kKc / 2 pairs): a B panel (kKc * kNr * 2 bytes = 16 KiB) stays in L1
// while the A panels stream past it; an M block of kMc rows (kMc * kKc * 2 = 72 KiB) and an N
// block of kNc columns (kNc * kKc * 2 = 256 KiB) stay in L2.
constexpr int64_t kKc = 512, kMc = 72, kNc = 256;

struct Operand {
  const int8_t* p;
  int64_t ld;
  bool trans;
  // Element (row, col) of op(X).
  int32_t at(int64_t row, int64_t col) const { return trans ? p[col * ld + row] : p[row * ld + col]; }
};

// op(A)[i0 .. i0+mc, k0 .. k0+kc) into panels of kMr rows, zero-padded to whole panels and pairs.
void pack_a(const Operand& a, int64_t i0, int64_t mc, int64_t k0, int64_t kc, int16_t* out) {
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t ip = 0; ip < mc; ip += kMr) {
    const int64_t mr = std::min(kMr, mc - ip);
    for (int64_t q = 0; q < pairs; ++q) {
      for (int64_t r = 0; r < kMr; ++r) {
        const int64_t kk = 2 * q;
        const bool row = r < mr;
        out[2 * r] = row ? static_cast<int16_t>(a.at(i0 + ip + r, k0 + kk)) : 0;
        out[2 * r + 1] = row && kk + 1 < kc ? static_cast<int16_t>(a.at(i0 + ip + r, k0 + kk + 1)) : 0;
      }
      out += 2 * kMr;
    }
  }
}

// Rows k and k + 1 of a row-major B (16 columns each), sign-extended and interleaved into
// [column][2] int16 for columns 0-7 (*lo) and 8-15 (*hi).
OCTET_TARGET_AVX2 inline void interleave_rows(const int8_t* r0, const int8_t* r1, __m256i* lo, __m256i* hi) {
  const __m256i x0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0)));
  const __m256i x1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r1)));
  const __m256i l = _mm256_unpacklo_epi16(x0, x1);  // columns 0-3 | 8-11
  const __m256i h = _mm256_unpackhi_epi16(x0, x1);  // columns 4-7 | 12-15
  *lo = _mm256_permute2x128_si256(l, h, 0x20);
  *hi = _mm256_permute2x128_si256(l, h, 0x31);
}

// 8 pairs (16 codes from k) of 8 rows of a transposed B (columns of op(B)), sign-extended: the
// 8 x 8 transpose of their 32-bit pairs: pair q of column c goes to out + q * 2 * kNr + 2 * c.
OCTET_TARGET_AVX2 inline void transpose_pairs(const int8_t* rows, int64_t ld, int16_t* out) {
  __m256i r[8];
  for (int c = 0; c < 8; ++c)
    r[c] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + c * ld)));
  // r[c] lanes (32-bit): pairs 0..7 of column c.
  __m256i t[8], u[8];
  for (int c = 0; c < 8; c += 2) {
    t[c] = _mm256_unpacklo_epi32(r[c], r[c + 1]);      // c0 c1 pairs 0,1 | 4,5
    t[c + 1] = _mm256_unpackhi_epi32(r[c], r[c + 1]);  // c0 c1 pairs 2,3 | 6,7
  }
  for (int c = 0; c < 8; c += 4)
    for (int h = 0; h < 2; ++h) {
      u[c + 2 * h] = _mm256_unpacklo_epi64(t[c + h], t[c + 2 + h]);      // c0..c3, pair 0 (h 0) or 2
      u[c + 2 * h + 1] = _mm256_unpackhi_epi64(t[c + h], t[c + 2 + h]);  // c0..c3, pair 1 (h 0) or 3
    }
  // u[0..3]: columns 0-3, pairs 0,1,2,3 | 4,5,6,7; u[4..7]: columns 4-7, the same.
  for (int q = 0; q < 4; ++q) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + q * 2 * kNr), _mm256_permute2x128_si256(u[q], u[q + 4], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (q + 4) * 2 * kNr),
                        _mm256_permute2x128_si256(u[q], u[q + 4], 0x31));
  }
}

// op(B)[k0 .. k0+kc, j0 .. j0+nc) into panels of kNr columns, zero-padded to whole panels and pairs.
OCTET_TARGET_AVX2 void pack_b(const Operand& b, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int16_t* out) {
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    const int64_t nr = std::min(kNr, nc - jp);
    int64_t q = 0;
    if (!b.trans && nr == kNr) {  // whole panel of a row-major B: 16 bytes of two rows at a time
      const int8_t* base = b.p + k0 * b.ld + j0 + jp;
      for (; 2 * q + 1 < kc; ++q, out += 2 * kNr) {
        __m256i lo, hi;
        interleave_rows(base + 2 * q * b.ld, base + (2 * q + 1) * b.ld, &lo, &hi);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kNr), hi);
      }
    }
    if (b.trans && nr == kNr) {  // whole panel of a transposed B: 8 pairs of 8 columns at a time
      const int8_t* base = b.p + (j0 + jp) * b.ld + k0;
      for (; 2 * q + 16 <= kc; q += 8, out += 8 * 2 * kNr) {
        transpose_pairs(base + 2 * q, b.ld, out);
        transpose_pairs(base + 8 * b.ld + 2 * q, b.ld, out + kNr);
      }
    }
    for (; q < pairs; ++q, out += 2 * kNr)
      for (int64_t c = 0; c < kNr; ++c) {
        const int64_t kk = 2 * q;
        const bool col = c < nr;
        out[2 * c] = col ? static_cast<int16_t>(b.at(k0 + kk, j0 + jp + c)) : 0;
        out[2 * c + 1] = col && kk + 1 < kc ? static_cast<int16_t>(b.at(k0 + kk + 1, j0 + jp + c)) : 0;
      }
  }
}

OCTET_TARGET_AVX2 inline __m256i broadcast_pair(const int16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, sizeof pair);
  return _mm256_set1_epi32(pair);
}

// C tile (mr x nr of kMr x kNr) (+)= A panel . B panel over `pairs` k pairs. The 12 accumulators
// are named variables, each row's broadcast used at once: with an array GCC kept a broadcast per
// row live and spilled half the accumulators to the stack.
OCTET_TARGET_AVX2 void tile(int64_t pairs, const int16_t* ap, const int16_t* bp, int32_t* c, int64_t ldc, int64_t mr,
                            int64_t nr, bool accumulate) {
  static_assert(kMr == 6 && kNr == 16, "the tile's registers are written out for 6 x 16");
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
          c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t q = 0; q < pairs; ++q, ap += 2 * kMr, bp += 2 * kNr) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + kNr));
    __m256i a = broadcast_pair(ap);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(a, b0));
    c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(a, b1));
    a = broadcast_pair(ap + 2);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(a, b0));
    c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(a, b1));
    a = broadcast_pair(ap + 4);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(a, b0));
    c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(a, b1));
    a = broadcast_pair(ap + 6);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(a, b0));
    c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(a, b1));
    a = broadcast_pair(ap + 8);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(a, b0));
    c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(a, b1));
    a = broadcast_pair(ap + 10);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(a, b0));
    c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(a, b1));
  }
  const __m256i acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (mr == kMr && nr == kNr) {
    for (int r = 0; r < kMr; ++r) {
      __m256i* dst = reinterpret_cast<__m256i*>(c + r * ldc);
      __m256i v0 = acc[r][0], v1 = acc[r][1];
      if (accumulate) {
        v0 = _mm256_add_epi32(v0, _mm256_loadu_si256(dst));
        v1 = _mm256_add_epi32(v1, _mm256_loadu_si256(dst + 1));
      }
      _mm256_storeu_si256(dst, v0);
      _mm256_storeu_si256(dst + 1, v1);
    }
    return;
  }
  alignas(32) int32_t part[kMr][kNr];
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(part[r]), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(part[r] + 8), acc[r][1]);
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j) c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0) + part[r][j];
}

// C[i0 .. i0+mc, j0 .. j0+nc) (+)= op(A) op(B) rows and columns of that block, all of K.
void gemm_block(const Operand& a, const Operand& b, int64_t i0, int64_t mc, int64_t j0, int64_t nc, int64_t k,
                int32_t* c, int64_t ldc, bool accumulate) {
  thread_local std::vector<int16_t> apack, bpack;
  const int64_t mpanels = (mc + kMr - 1) / kMr, npanels = (nc + kNr - 1) / kNr;
  apack.resize(static_cast<size_t>(mpanels * kMr * kKc));
  bpack.resize(static_cast<size_t>(npanels * kNr * kKc));
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = std::min(kKc, k - k0), pairs = (kc + 1) / 2;
    pack_b(b, k0, kc, j0, nc, bpack.data());
    pack_a(a, i0, mc, k0, kc, apack.data());
    const bool add = accumulate || k0 > 0;
    for (int64_t jp = 0; jp < npanels; ++jp)
      for (int64_t ip = 0; ip < mpanels; ++ip)
        tile(pairs, apack.data() + ip * kMr * 2 * pairs, bpack.data() + jp * kNr * 2 * pairs,
             c + (i0 + ip * kMr) * ldc + j0 + jp * kNr, ldc, std::min(kMr, mc - ip * kMr), std::min(kNr, nc - jp * kNr),
             add);
  }
}

}  // namespace

void int8_gemm_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
                    const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  const Operand oa{a, lda, trans_a}, ob{b, ldb, trans_b};
  const int64_t mblocks = (m + kMc - 1) / kMc, nblocks = (n + kNc - 1) / kNc;
  // Blocks of C are independent: the threads take them whole (each packs its own operands).
  parallel_for(0, mblocks * nblocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = t / nblocks * kMc, j0 = t % nblocks * kNc;
      gemm_block(oa, ob, i0, std::min(kMc, m - i0), j0, std::min(kNc, n - j0), k, c, ldc, accumulate);
    }
  });
}

}  // namespace octet::quant::cpu::detail

#endif  // OCTET_CPU_X86
