// The x86 raw-dot kernels of the zero-point GEMM (quant/cpu/qgemm_detail.h): AVX-512 VNNI
// (vpdpbusd) and AVX2 (widen to 16 bits + vpmaddwd). A tile of M activation rows by J weight rows
// keeps M * J accumulators in registers; each weight vector loaded once serves all M rows.
#include "quant/cpu/qgemm_detail.h"

#include <vector>

#include "core/cpu/isa.h"

#ifdef OCTET_CPU_X86
#include "core/cpu/x86_intrin.h"
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
  // One loop for the full vectors and the tail (masked loads read nothing past the row; a second
  // loop for the tail made GCC copy every accumulator on each iteration).
  for (int64_t kk = 0; kk < k; kk += 64) {
    const __mmask64 mask = k - kk >= 64 ? ~__mmask64{0} : _cvtu64_mask64(~uint64_t{0} >> (64 - (k - kk)));
    __m512i bv[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      bv[j] = _mm512_maskz_loadu_epi8(mask, b + j * ldb + kk);
      // The next tile's weight rows, a whole tile ahead: more rows streaming from memory at once
      // (a tile of many activation rows takes long per weight byte). Past the matrix: harmless.
      _mm_prefetch(reinterpret_cast<const char*>(b + (j + J) * ldb + kk), _MM_HINT_T0);
    }
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

OCTET_TARGET_AVX2 inline int32_t hsum256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// A widened to 16 bits once per call (a16, k per row), so each step widens only the weights.
template <int M, int J>
OCTET_TARGET_AVX2 void avx2_tile(int64_t k, const int16_t* a, int64_t lda, const int8_t* b, int64_t ldb, int32_t* d,
                                 int64_t ldd) {
  __m256i acc[M][J];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) acc[i][j] = _mm256_setzero_si256();
  const int64_t k16 = k / 16 * 16;
  for (int64_t kk = 0; kk < k16; kk += 16) {
    __m256i bv[J];
#pragma GCC unroll 4
    for (int j = 0; j < J; ++j) {
      bv[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + j * ldb + kk)));
      if ((kk & 63) == 0) _mm_prefetch(reinterpret_cast<const char*>(b + (j + J) * ldb + kk), _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i * lda + kk));
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
      for (int64_t t = k16; t < k; ++t) s += static_cast<int32_t>(a[i * lda + t]) * b[j * ldb + t];
      d[i * ldd + j] = s;
    }
}

template <typename TA>
using TileFn = void (*)(int64_t, const TA*, int64_t, const int8_t*, int64_t, int32_t*, int64_t);

// The tiles of one kernel family: [rows - 1][0] M x 1, [rows - 1][1] M x J_WIDE_M (the tile for
// more than MB / 2 rows), [rows - 1][2] M x J_NARROW_M (for at most MB / 2 rows, more weight rows
// at once); null where the accumulators would not fit the registers.
template <typename TA, int MB>
struct Tiles {
  TileFn<TA> fn[MB][3];
  int j_wide, j_narrow;
};

template <int M, int J>
constexpr TileFn<uint8_t> vnni_fn() {
  if constexpr (M * J <= 16)
    return vnni_tile<M, J>;
  else
    return nullptr;
}
template <int M, int J>
constexpr TileFn<int16_t> avx2_fn() {
  if constexpr (M * J <= 8)
    return avx2_tile<M, J>;
  else
    return nullptr;
}

// 32 zmm registers: up to 16 accumulators.
constexpr Tiles<uint8_t, 8> kVnniTiles{{{vnni_fn<1, 1>(), vnni_fn<1, 2>(), vnni_fn<1, 4>()},
                                        {vnni_fn<2, 1>(), vnni_fn<2, 2>(), vnni_fn<2, 4>()},
                                        {vnni_fn<3, 1>(), vnni_fn<3, 2>(), vnni_fn<3, 4>()},
                                        {vnni_fn<4, 1>(), vnni_fn<4, 2>(), vnni_fn<4, 4>()},
                                        {vnni_fn<5, 1>(), vnni_fn<5, 2>(), vnni_fn<5, 4>()},
                                        {vnni_fn<6, 1>(), vnni_fn<6, 2>(), vnni_fn<6, 4>()},
                                        {vnni_fn<7, 1>(), vnni_fn<7, 2>(), vnni_fn<7, 4>()},
                                        {vnni_fn<8, 1>(), vnni_fn<8, 2>(), vnni_fn<8, 4>()}},
                                       2,
                                       4};
// 16 ymm registers: up to 8 accumulators.
constexpr Tiles<int16_t, 4> kAvx2Tiles{{{avx2_fn<1, 1>(), avx2_fn<1, 2>(), avx2_fn<1, 4>()},
                                        {avx2_fn<2, 1>(), avx2_fn<2, 2>(), avx2_fn<2, 4>()},
                                        {avx2_fn<3, 1>(), avx2_fn<3, 2>(), avx2_fn<3, 4>()},
                                        {avx2_fn<4, 1>(), avx2_fn<4, 2>(), avx2_fn<4, 4>()}},
                                       2,
                                       4};

// Columns [j0, j1) for all m rows in blocks of up to MB activation rows and tiles of J weight rows.
// rows_outer: each block of activation rows (MB * k bytes, L1-resident for the VNNI kernel's 8 x 4096)
// runs over all the tiles, the weights streamed once per block. Otherwise each tile of weight rows
// runs over all the blocks, the weights streamed once (the AVX2 kernel, compute-bound, gains).
template <typename TA, int MB>
void run_tiles(const Tiles<TA, MB>& tiles, bool rows_outer, int64_t m, int64_t j0, int64_t j1, int64_t k, const TA* a,
               int64_t lda, const int8_t* b, int64_t ldb, int32_t* d, int64_t ldd) {
  auto tile = [&](int64_t i, int64_t j, int which) {
    const int64_t rows = m - i < MB ? m - i : MB;
    tiles.fn[rows - 1][which](k, a + i * lda, lda, b + j * ldb, ldb, d + i * ldd + j, ldd);
  };
  if (rows_outer) {
    for (int64_t i = 0; i < m; i += MB) {
      const int which = m - i > MB / 2 ? 1 : 2;
      const int64_t J = which == 1 ? tiles.j_wide : tiles.j_narrow;
      int64_t j = j0;
      for (; j + J <= j1; j += J) tile(i, j, which);
      for (; j < j1; ++j) tile(i, j, 0);
    }
    return;
  }
  const int which = m > MB / 2 ? 1 : 2;
  const int64_t J = which == 1 ? tiles.j_wide : tiles.j_narrow;
  int64_t j = j0;
  for (; j + J <= j1; j += J)
    for (int64_t i = 0; i < m; i += MB) tile(i, j, which);
  for (; j < j1; ++j)
    for (int64_t i = 0; i < m; i += MB) tile(i, j, 0);
}

}  // namespace

void raw_dot_avx512_vnni(int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                         int64_t ldb, int32_t* d, int64_t ldd) {
  run_tiles(kVnniTiles, /*rows_outer=*/true, m, j0, j1, k, a, lda, b, ldb, d, ldd);
}

void raw_dot_avx2(int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
                  int64_t ldb, int32_t* d, int64_t ldd) {
  std::vector<int16_t> a16(static_cast<size_t>(m * k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t t = 0; t < k; ++t) a16[i * k + t] = a[i * lda + t];
  run_tiles(kAvx2Tiles, /*rows_outer=*/false, m, j0, j1, k, a16.data(), k, b, ldb, d, ldd);
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
