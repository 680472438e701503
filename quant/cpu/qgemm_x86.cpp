// The x86 raw-dot kernels of the zero-point GEMM (quant/cpu/qgemm_detail.h): AVX-512 VNNI
// (vpdpbusd) and AVX2 (widen to 16 bits + vpmaddwd). A tile of M activation rows by J weight rows
// keeps M * J accumulators in registers; each weight vector loaded once serves all M rows.
#include "quant/cpu/qgemm_detail.h"

#include "core/cpu/isa.h"

#ifdef OCTET_CPU_X86
// GCC 12's AVX-512 headers build unmasked intrinsics on a self-initialized "undefined" vector,
// which -Wuninitialized reports once inlined here (GCC bug 105593); the values are never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace octet::quant::cpu::detail {

#ifdef OCTET_CPU_X86

#define OCTET_TARGET_VNNI __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

bool vnni_available() {
  static const bool ok = octet::cpu::isa_supported(octet::cpu::Isa::avx512) && __builtin_cpu_supports("avx512vnni");
  return ok;
}
bool avx2_available() { return octet::cpu::isa_supported(octet::cpu::Isa::avx2); }

namespace {

// M activation rows x J weight rows, all of k.
template <int M, int J>
OCTET_TARGET_VNNI void vnni_tile(int64_t k, const uint8_t* a, int64_t lda, const int8_t* b, int64_t ldb, int32_t* d,
                                 int64_t ldd) {
  __m512i acc[M][J];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[i][j] = _mm512_setzero_si512();
  int64_t kk = 0;
  for (; kk + 64 <= k; kk += 64) {
    __m512i bv[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      bv[j] = _mm512_loadu_si512(b + j * ldb + kk);
      // The next tile's weight rows, a whole tile ahead: more rows streaming from memory at once
      // (a tile of many activation rows takes long per weight byte). Past the matrix: harmless.
      _mm_prefetch(reinterpret_cast<const char*>(b + (j + J) * ldb + kk), _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m512i av = _mm512_loadu_si512(a + i * lda + kk);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], av, bv[j]);
    }
  }
  if (kk < k) {  // masked loads read nothing past the row
    const __mmask64 mask = _cvtu64_mask64(~uint64_t{0} >> (64 - (k - kk)));
    __m512i bv[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) bv[j] = _mm512_maskz_loadu_epi8(mask, b + j * ldb + kk);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m512i av = _mm512_maskz_loadu_epi8(mask, a + i * lda + kk);
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], av, bv[j]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) d[i * ldd + j] = _mm512_reduce_add_epi32(acc[i][j]);
}

template <int M>
OCTET_TARGET_VNNI void vnni_rows(int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                                 int64_t ldb, int32_t* d, int64_t ldd) {
  constexpr int J = M <= 4 ? 4 : 2;  // M * J <= 16 accumulators of the 32 zmm registers
  int64_t j = j0;
  for (; j + J <= j1; j += J) vnni_tile<M, J>(k, a, lda, b + j * ldb, ldb, d + j, ldd);
  for (; j < j1; ++j) vnni_tile<M, 1>(k, a, lda, b + j * ldb, ldb, d + j, ldd);
}

OCTET_TARGET_AVX2 inline int32_t hsum256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

template <int M, int J>
OCTET_TARGET_AVX2 void avx2_tile(int64_t k, const uint8_t* a, int64_t lda, const int8_t* b, int64_t ldb, int32_t* d,
                                 int64_t ldd) {
  __m256i acc[M][J];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[i][j] = _mm256_setzero_si256();
  int64_t kk = 0;
  for (; kk + 16 <= k; kk += 16) {
    __m256i bv[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      bv[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + j * ldb + kk)));
      if ((kk & 63) == 0) _mm_prefetch(reinterpret_cast<const char*>(b + (j + J) * ldb + kk), _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m256i av = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i * lda + kk)));
      // 16-bit products up to 255 * 128, pair sums in 32 bits: exact.
#pragma GCC unroll 4
      for (int j = 0; j < J; ++j) acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(av, bv[j]));
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      int32_t s = hsum256(acc[i][j]);
      for (int64_t t = kk; t < k; ++t) s += static_cast<int32_t>(a[i * lda + t]) * b[j * ldb + t];
      d[i * ldd + j] = s;
    }
}

template <int M>
OCTET_TARGET_AVX2 void avx2_rows(int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                                 int64_t ldb, int32_t* d, int64_t ldd) {
  constexpr int J = M <= 2 ? 4 : M <= 4 ? 2 : 1;  // M * J <= 8 accumulators of the 16 ymm registers
  int64_t j = j0;
  for (; j + J <= j1; j += J) avx2_tile<M, J>(k, a, lda, b + j * ldb, ldb, d + j, ldd);
  for (; j < j1; ++j) avx2_tile<M, 1>(k, a, lda, b + j * ldb, ldb, d + j, ldd);
}

using RowsFn = void (*)(int64_t, int64_t, int64_t, const uint8_t*, int64_t, const int8_t*, int64_t, int32_t*, int64_t);

// Rows in blocks of 8 (the last block 1..8 rows).
void run_blocks(const RowsFn (&fns)[8], int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda,
                const int8_t* b, int64_t ldb, int32_t* d, int64_t ldd) {
  for (int64_t i = 0; i < m; i += 8) {
    const int64_t rows = m - i < 8 ? m - i : 8;
    fns[rows - 1](j0, j1, k, a + i * lda, lda, b, ldb, d + i * ldd, ldd);
  }
}

}  // namespace

void raw_dot_avx512_vnni(int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                         int64_t ldb, int32_t* d, int64_t ldd) {
  static constexpr RowsFn fns[8] = {vnni_rows<1>, vnni_rows<2>, vnni_rows<3>, vnni_rows<4>,
                                    vnni_rows<5>, vnni_rows<6>, vnni_rows<7>, vnni_rows<8>};
  run_blocks(fns, m, j0, j1, k, a, lda, b, ldb, d, ldd);
}

void raw_dot_avx2(int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                  int64_t ldb, int32_t* d, int64_t ldd) {
  static constexpr RowsFn fns[8] = {avx2_rows<1>, avx2_rows<2>, avx2_rows<3>, avx2_rows<4>,
                                    avx2_rows<5>, avx2_rows<6>, avx2_rows<7>, avx2_rows<8>};
  run_blocks(fns, m, j0, j1, k, a, lda, b, ldb, d, ldd);
}

#else  // not x86: the portable path only

bool vnni_available() { return false; }
bool avx2_available() { return false; }
void raw_dot_avx512_vnni(int64_t, int64_t, int64_t, int64_t, const uint8_t*, int64_t, const int8_t*, int64_t, int32_t*,
                         int64_t) {}
void raw_dot_avx2(int64_t, int64_t, int64_t, int64_t, const uint8_t*, int64_t, const int8_t*, int64_t, int32_t*,
                  int64_t) {}

#endif

}  // namespace octet::quant::cpu::detail

#ifdef OCTET_CPU_X86
#pragma GCC diagnostic pop
#endif
