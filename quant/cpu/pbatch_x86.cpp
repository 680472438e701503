// AVX2 and AVX-512 VPOPCNTDQ row kernels of PrecisionBatching (quant/cpu/pbatch_kernels.h). Each is
// compiled for its ISA with a target attribute and only called after pb_kernel_supported said yes.
//
// The loop: the activation planes of a batch chunk, [batch, x_planes, words], are one list of
// batch * x_planes planes at a stride of `words`; they are taken in groups of G (up to 16 on AVX-512,
// 8 on AVX2: G accumulators plus the weight vector stay in registers). For one row and one group,
// the weight planes are walked from the top one down (Horner: the accumulators doubled before each
// lower plane, the top plane's popcounts subtracted), and each vector of W_p is loaded once and
// ANDed with the same vector of all G activation planes, s_g += popcount(W_p AND X_g) in 64-bit
// lanes. After the row, each s_g is shifted by its plane j and added (subtracted: the top activation
// plane) to its batch row's total. So a small batch (batch * x_planes <= G, e.g. 8 rows of 2-bit
// activations) reads each weight vector once for all its rows; a larger one rereads the row's
// planes (a few KB, in L1) once per group.
#include "quant/cpu/pbatch_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include "core/cpu/x86_intrin.h"

#include <algorithm>

#include "core/cpu/isa.h"
#include "quant/pbatch.h"

#define OCTET_TARGET_PB512 __attribute__((target("avx2,avx512f,avx512bw,avx512dq,avx512vl,avx512vpopcntdq")))

namespace octet::quant::cpu::detail {
namespace {

constexpr int kMaxGroup = 16;

// The activation planes t0 .. t0 + count - 1 of a batch chunk, with each one's batch row, shift
// (j + first_plane) and sign (the top activation plane is negative).
struct Group {
  int t0 = 0, count = 0;
  int b[kMaxGroup] = {};
  int shift[kMaxGroup] = {};
  bool neg[kMaxGroup] = {};
};

// Groups of at most max_group planes, of near-equal size, covering the chunk's batch * x_planes.
int make_groups(const PbGemmArgs& a, int max_group, Group* groups) {
  const int planes = static_cast<int>(a.batch) * a.x_planes;
  const int n = (planes + max_group - 1) / max_group, size = (planes + n - 1) / n;
  int count = 0;
  for (int t0 = 0; t0 < planes; t0 += size, ++count) {
    Group& g = groups[count];
    g.t0 = t0;
    g.count = std::min(size, planes - t0);
    for (int i = 0; i < g.count; ++i) {
      const int j = (t0 + i) % a.x_planes;
      g.b[i] = (t0 + i) / a.x_planes;
      g.shift[i] = j + a.first_plane;
      g.neg[i] = j == a.x_planes - 1;
    }
  }
  return count;
}
// At most kPbMaxBatch * kPbMaxActivationBits planes; AVX2's groups of 8 make the most groups.
constexpr int kMaxGroups = kPbMaxBatch * kPbMaxActivationBits / 8;

// The kernels walk a row's planes from the top one down (backwards in memory within the row); the
// next row's planes are prefetched. Measured on Zen 5 at N = 4096, w8: about 4x faster than without
// (a shared machine, so roughly); prefetching 2 or 4 rows ahead, or walking upwards, was no better.
constexpr int64_t kAhead = 1;
inline void prefetch_row(const uint64_t* w_row, const PbGemmArgs& a) {
  for (int64_t i = a.first_plane * a.words; i < a.w_planes * a.words; i += 8) _mm_prefetch(w_row + i, _MM_HINT_T0);
}

// ---- AVX-512 VPOPCNTDQ

// s[g] -= or += per-lane popcount(W_p AND X_g) over the row's words.
template <int G, bool kSub>
OCTET_TARGET_PB512 inline __attribute__((always_inline)) void plane512(const uint64_t* wp, const uint64_t* x0,
                                                                       int64_t words, __m512i* s) {
  for (int64_t c = 0; c < words; c += 8) {
    const __m512i w = _mm512_loadu_si512(wp + c);
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const __m512i v = _mm512_popcnt_epi64(_mm512_and_si512(w, _mm512_loadu_si512(x0 + g * words + c)));
      s[g] = kSub ? _mm512_sub_epi64(s[g], v) : _mm512_add_epi64(s[g], v);
    }
  }
}

// total[b] += sum over the group's planes g of batch row b of sign_g 2^shift_g (sum over weight
// planes p >= first of sign_p 2^(p - first) popcount(W_p AND X_g)), per lane.
template <int G>
OCTET_TARGET_PB512 void row_group512(const uint64_t* w_row, int w_planes, int first, int64_t words, const uint64_t* x0,
                                     const Group& grp, __m512i* total) {
  __m512i s[G];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) s[g] = _mm512_setzero_si512();
  plane512<G, true>(w_row + (w_planes - 1) * words, x0, words, s);
  for (int p = w_planes - 2; p >= first; --p) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) s[g] = _mm512_slli_epi64(s[g], 1);
    plane512<G, false>(w_row + p * words, x0, words, s);
  }
  // The group's planes come in batch-row order: one running sum, flushed when the row changes.
  __m512i t = _mm512_setzero_si512();
  int cur = grp.b[0];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    if (grp.b[g] != cur) {
      total[cur] = _mm512_add_epi64(total[cur], t);
      t = _mm512_setzero_si512();
      cur = grp.b[g];
    }
    const __m512i v = _mm512_sll_epi64(s[g], _mm_cvtsi32_si128(grp.shift[g]));
    t = grp.neg[g] ? _mm512_sub_epi64(t, v) : _mm512_add_epi64(t, v);
  }
  total[cur] = _mm512_add_epi64(total[cur], t);
}

// row_group512<count> for a run-time group size.
OCTET_TARGET_PB512 void row_group512_any(const uint64_t* w_row, int w_planes, int first, int64_t words,
                                         const uint64_t* x0, const Group& grp, __m512i* total) {
  switch (grp.count) {
#define OCTET_PB_CASE(G) \
  case G:                \
    return row_group512<G>(w_row, w_planes, first, words, x0, grp, total);
    OCTET_PB_CASE(1)
    OCTET_PB_CASE(2)
    OCTET_PB_CASE(3)
    OCTET_PB_CASE(4) OCTET_PB_CASE(5) OCTET_PB_CASE(6) OCTET_PB_CASE(7) OCTET_PB_CASE(8) OCTET_PB_CASE(9)
        OCTET_PB_CASE(10) OCTET_PB_CASE(11) OCTET_PB_CASE(12) OCTET_PB_CASE(13) OCTET_PB_CASE(14) OCTET_PB_CASE(15)
            OCTET_PB_CASE(16)
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

template <int G, bool kSub>
OCTET_TARGET_AVX2 inline __attribute__((always_inline)) void plane256(const uint64_t* wp, const uint64_t* x0,
                                                                      int64_t words, __m256i* s) {
  const __m256i lut =
      _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t c = 0; c < words; c += 4) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + c));
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + g * words + c));
      const __m256i v = popcount256(_mm256_and_si256(w, x), lut, nibble);
      s[g] = kSub ? _mm256_sub_epi64(s[g], v) : _mm256_add_epi64(s[g], v);
    }
  }
}

template <int G>
OCTET_TARGET_AVX2 void row_group256(const uint64_t* w_row, int w_planes, int first, int64_t words, const uint64_t* x0,
                                    __m256i* out) {
  __m256i s[G];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) s[g] = _mm256_setzero_si256();
  plane256<G, true>(w_row + (w_planes - 1) * words, x0, words, s);
  for (int p = w_planes - 2; p >= first; --p) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) s[g] = _mm256_slli_epi64(s[g], 1);
    plane256<G, false>(w_row + p * words, x0, words, s);
  }
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) out[g] = s[g];
}

OCTET_TARGET_AVX2 void row_group256_any(int count, const uint64_t* w_row, int w_planes, int first, int64_t words,
                                        const uint64_t* x0, __m256i* out) {
  switch (count) {
#define OCTET_PB_CASE(G) \
  case G:                \
    return row_group256<G>(w_row, w_planes, first, words, x0, out);
    OCTET_PB_CASE(1)
    OCTET_PB_CASE(2)
    OCTET_PB_CASE(3)
    OCTET_PB_CASE(4) OCTET_PB_CASE(5) OCTET_PB_CASE(6) OCTET_PB_CASE(7) OCTET_PB_CASE(8)
#undef OCTET_PB_CASE
        default : break;
  }
}

}  // namespace

OCTET_TARGET_PB512 void pb_rows_avx512(const PbGemmArgs& a, int64_t r0, int64_t r1) {
  Group groups[kMaxGroups];
  const int n_groups = make_groups(a, kMaxGroup, groups);
  for (int64_t r = r0; r < r1; ++r) {
    __m512i total[kPbMaxBatch];
    for (int64_t b = 0; b < a.batch; ++b) total[b] = _mm512_setzero_si512();
    const uint64_t* w_row = a.w + r * a.w_planes * a.words;
    if (r + kAhead < r1) prefetch_row(w_row + kAhead * a.w_planes * a.words, a);
    for (int gi = 0; gi < n_groups; ++gi) {
      const Group& g = groups[gi];
      row_group512_any(w_row, a.w_planes, a.first_plane, a.words, a.x + g.t0 * a.words, g, total);
    }
    for (int64_t b = 0; b < a.batch; ++b) a.acc[b * a.rows + r] = _mm512_reduce_add_epi64(total[b]);
  }
}

OCTET_TARGET_AVX2 void pb_rows_avx2(const PbGemmArgs& a, int64_t r0, int64_t r1) {
  Group groups[kMaxGroups];
  const int n_groups = make_groups(a, kGroup256, groups);
  for (int64_t r = r0; r < r1; ++r) {
    __m256i total[kPbMaxBatch];
    for (int64_t b = 0; b < a.batch; ++b) total[b] = _mm256_setzero_si256();
    const uint64_t* w_row = a.w + r * a.w_planes * a.words;
    if (r + kAhead < r1) prefetch_row(w_row + kAhead * a.w_planes * a.words, a);
    for (int gi = 0; gi < n_groups; ++gi) {
      const Group& g = groups[gi];
      __m256i s[kGroup256];
      row_group256_any(g.count, w_row, a.w_planes, a.first_plane, a.words, a.x + g.t0 * a.words, s);
      for (int i = 0; i < g.count; ++i) {
        const __m256i v = _mm256_sll_epi64(s[i], _mm_cvtsi32_si128(g.shift[i]));
        total[g.b[i]] = g.neg[i] ? _mm256_sub_epi64(total[g.b[i]], v) : _mm256_add_epi64(total[g.b[i]], v);
      }
    }
    for (int64_t b = 0; b < a.batch; ++b) {
      alignas(32) uint64_t lanes[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total[b]);
      a.acc[b * a.rows + r] = static_cast<int64_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
    }
  }
}

// Bit j of 16 codes at once: vptestmd gives the 16 bits of a plane word directly.
OCTET_TARGET_PB512 void pb_transpose_avx512(const uint32_t* code, int n, int bits, uint64_t* planes, int64_t stride) {
  __m512i c[4];
  for (int q = 0; q < 4; ++q) {
    const int left = std::clamp(n - 16 * q, 0, 16);
    const __mmask16 m = static_cast<__mmask16>((uint32_t{1} << left) - 1u);
    c[q] = _mm512_maskz_loadu_epi32(m, code + 16 * q);
  }
  for (int j = 0; j < bits; ++j) {
    const __m512i bit = _mm512_set1_epi32(static_cast<int>(uint32_t{1} << j));
    uint64_t word = 0;
    for (int q = 0; q < 4; ++q)
      word |= static_cast<uint64_t>(_cvtmask16_u32(_mm512_test_epi32_mask(c[q], bit))) << (16 * q);
    planes[j * stride] = word;
  }
}

}  // namespace octet::quant::cpu::detail

#endif
