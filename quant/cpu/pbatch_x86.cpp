// AVX2 and AVX-512 VPOPCNTDQ row kernels of PrecisionBatching (quant/cpu/pbatch_kernels.h). Each is
// compiled for its ISA with a target attribute and only called after pb_kernel_supported said yes.
//
// The loop: the activation planes of a batch chunk, [batch, x_planes, words], are one list of
// batch * x_planes planes at a stride of `words`; they are taken in groups of G (up to 16 on AVX-512,
// 8 on AVX2: G accumulators plus the weight vector stay in registers). For one row, one group and
// one weight plane p, each 512-bit chunk of W_p is loaded once and ANDed with the same chunk of all G
// activation planes, the popcounts summed per plane in 64-bit lanes, unshifted; after the pass each
// plane's lanes are shifted by p + j and added (or subtracted: top planes) to its batch row's total.
// So a small batch (batch * x_planes <= G, e.g. 8 rows of 2-bit activations) reads each weight
// vector once for all its rows; a larger one rereads the row's planes (a few KB) from L1.
#include "quant/cpu/pbatch_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

// GCC 12's AVX-512 headers build unmasked intrinsics on a self-initialized "undefined" vector,
// which -Wuninitialized reports once inlined here (GCC bug 105593); the values are never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "core/cpu/isa.h"
#include "quant/pbatch.h"

#define OCTET_TARGET_PB512 __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512vpopcntdq")))

namespace octet::quant::cpu::detail {
namespace {

// Groups of at most `max_group` planes of near-equal size covering n planes.
int group_size(int n, int max_group) {
  const int groups = (n + max_group - 1) / max_group;
  return (n + groups - 1) / groups;
}

bool negative(int p, int w_planes, int j, int x_planes) { return (p == w_planes - 1) != (j == x_planes - 1); }

// ---- AVX-512 VPOPCNTDQ

constexpr int kGroup512 = 16;

// cnt[g] = per-lane popcount(W_p AND X_{t0+g}) summed over the row's chunks.
template <int G>
OCTET_TARGET_PB512 void counts512(const uint64_t* wp, const uint64_t* x0, int64_t words, __m512i* cnt) {
  __m512i s[G];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) s[g] = _mm512_setzero_si512();
  for (int64_t c = 0; c < words; c += 8) {
    const __m512i w = _mm512_loadu_si512(wp + c);
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g)
      s[g] = _mm512_add_epi64(s[g], _mm512_popcnt_epi64(_mm512_and_si512(w, _mm512_loadu_si512(x0 + g * words + c))));
  }
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) cnt[g] = s[g];
}

// counts512<g_count> for a run-time group size; the switch keeps the accumulators in registers.
OCTET_TARGET_PB512 void counts512_any(int g_count, const uint64_t* wp, const uint64_t* x0, int64_t words,
                                      __m512i* cnt) {
  switch (g_count) {
#define OCTET_PB_CASE(G) \
  case G:                \
    return counts512<G>(wp, x0, words, cnt);
    OCTET_PB_CASE(1)
    OCTET_PB_CASE(2) OCTET_PB_CASE(3) OCTET_PB_CASE(4) OCTET_PB_CASE(5) OCTET_PB_CASE(6) OCTET_PB_CASE(7)
        OCTET_PB_CASE(8) OCTET_PB_CASE(9) OCTET_PB_CASE(10) OCTET_PB_CASE(11) OCTET_PB_CASE(12) OCTET_PB_CASE(13)
            OCTET_PB_CASE(14) OCTET_PB_CASE(15) OCTET_PB_CASE(16)
#undef OCTET_PB_CASE
                default : break;
  }
}

// ---- AVX2: popcount of bytes by two nibble lookups (vpshufb), summed to 64-bit lanes (vpsadbw)

constexpr int kGroup256 = 8;

OCTET_TARGET_AVX2 inline __m256i popcount256(__m256i v, __m256i lut, __m256i nibble) {
  const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, nibble));
  const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
  return _mm256_sad_epu8(_mm256_add_epi8(lo, hi), _mm256_setzero_si256());
}

template <int G>
OCTET_TARGET_AVX2 void counts256(const uint64_t* wp, const uint64_t* x0, int64_t words, __m256i* cnt) {
  const __m256i lut =
      _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  __m256i s[G];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) s[g] = _mm256_setzero_si256();
  for (int64_t c = 0; c < words; c += 4) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + c));
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + g * words + c));
      s[g] = _mm256_add_epi64(s[g], popcount256(_mm256_and_si256(w, x), lut, nibble));
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) cnt[g] = s[g];
}

OCTET_TARGET_AVX2 void counts256_any(int g_count, const uint64_t* wp, const uint64_t* x0, int64_t words, __m256i* cnt) {
  switch (g_count) {
#define OCTET_PB_CASE(G) \
  case G:                \
    return counts256<G>(wp, x0, words, cnt);
    OCTET_PB_CASE(1)
    OCTET_PB_CASE(2) OCTET_PB_CASE(3) OCTET_PB_CASE(4) OCTET_PB_CASE(5) OCTET_PB_CASE(6) OCTET_PB_CASE(7)
        OCTET_PB_CASE(8)
#undef OCTET_PB_CASE
            default : break;
  }
}

}  // namespace

OCTET_TARGET_PB512 void pb_rows_avx512(const PbGemmArgs& a, int64_t r0, int64_t r1) {
  const int planes = static_cast<int>(a.batch) * a.x_planes;
  const int gs = group_size(planes, kGroup512);
  for (int64_t r = r0; r < r1; ++r) {
    __m512i total[kPbMaxBatch];
    for (int64_t b = 0; b < a.batch; ++b) total[b] = _mm512_setzero_si512();
    for (int t0 = 0; t0 < planes; t0 += gs) {
      const int g_count = std::min(gs, planes - t0);
      for (int p = a.first_plane; p < a.w_planes; ++p) {
        __m512i cnt[kGroup512];
        counts512_any(g_count, a.w + (r * a.w_planes + p) * a.words, a.x + t0 * a.words, a.words, cnt);
        for (int g = 0; g < g_count; ++g) {
          const int b = (t0 + g) / a.x_planes, j = (t0 + g) % a.x_planes;
          const __m512i v = _mm512_sll_epi64(cnt[g], _mm_cvtsi32_si128(p + j));
          total[b] =
              negative(p, a.w_planes, j, a.x_planes) ? _mm512_sub_epi64(total[b], v) : _mm512_add_epi64(total[b], v);
        }
      }
    }
    for (int64_t b = 0; b < a.batch; ++b) a.acc[b * a.rows + r] = _mm512_reduce_add_epi64(total[b]);
  }
}

OCTET_TARGET_AVX2 void pb_rows_avx2(const PbGemmArgs& a, int64_t r0, int64_t r1) {
  const int planes = static_cast<int>(a.batch) * a.x_planes;
  const int gs = group_size(planes, kGroup256);
  for (int64_t r = r0; r < r1; ++r) {
    __m256i total[kPbMaxBatch];
    for (int64_t b = 0; b < a.batch; ++b) total[b] = _mm256_setzero_si256();
    for (int t0 = 0; t0 < planes; t0 += gs) {
      const int g_count = std::min(gs, planes - t0);
      for (int p = a.first_plane; p < a.w_planes; ++p) {
        __m256i cnt[kGroup256];
        counts256_any(g_count, a.w + (r * a.w_planes + p) * a.words, a.x + t0 * a.words, a.words, cnt);
        for (int g = 0; g < g_count; ++g) {
          const int b = (t0 + g) / a.x_planes, j = (t0 + g) % a.x_planes;
          const __m256i v = _mm256_sll_epi64(cnt[g], _mm_cvtsi32_si128(p + j));
          total[b] =
              negative(p, a.w_planes, j, a.x_planes) ? _mm256_sub_epi64(total[b], v) : _mm256_add_epi64(total[b], v);
        }
      }
    }
    for (int64_t b = 0; b < a.batch; ++b) {
      alignas(32) uint64_t lanes[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total[b]);
      a.acc[b * a.rows + r] = static_cast<int64_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
    }
  }
}

}  // namespace octet::quant::cpu::detail

#pragma GCC diagnostic pop

#endif
