// AVX2 and AVX-512 kernels of block-wise quantization (quant/cpu/blockwise.h). Each function is
// compiled for its ISA with __attribute__((target)) and only called after __builtin_cpu_supports
// said yes; tails go to the portable kernels, so results are bit-identical by construction of the
// same code table (or search tree), the same IEEE division and the same comparisons.
#include "quant/cpu/blockwise.h"

#ifdef OCTET_CPU_X86

#include "core/cpu/x86_intrin.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace octet::quant::cpu::detail {

// ---- AVX2: 8 lanes

OCTET_TARGET_AVX2 static float hmax_avx2(__m256 m) {
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_shuffle_ps(r, r, 1));
  return _mm_cvtss_f32(r);
}

OCTET_TARGET_AVX2 float absmax_avx2(const float* x, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a0 = _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask);
    __m256 a1 = _mm256_and_ps(_mm256_loadu_ps(x + i + 8), abs_mask);
    // Non-finite lanes become 0 (the compare is false for NaN and inf).
    m0 = _mm256_max_ps(m0, _mm256_and_ps(a0, _mm256_cmp_ps(a0, inf, _CMP_LT_OQ)));
    m1 = _mm256_max_ps(m1, _mm256_and_ps(a1, _mm256_cmp_ps(a1, inf, _CMP_LT_OQ)));
  }
  float m = hmax_avx2(_mm256_max_ps(m0, m1));
  float tail = absmax_portable(x + i, n - i);
  return tail > m ? tail : m;
}

// Codes of 8 normalized values from the code table (quant/code_table.h): the same key, bucket and
// compare as table_code, with one gather.
OCTET_TARGET_AVX2 static inline __m256i table_codes_avx2(const float* x, __m256 absmax, const CodeTable& t) {
  __m256 v = _mm256_div_ps(_mm256_loadu_ps(x), absmax);
  v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v);  // NaN -> 0
  const __m256i b = _mm256_castps_si256(v);
  const __m256i key =
      _mm256_min_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(static_cast<int>(t.a1)));
  const __m256i d = _mm256_sub_epi32(key, _mm256_set1_epi32(static_cast<int>(t.a0)));
  const __m256i mask = _mm256_set1_epi32(static_cast<int>((1u << t.shift) - 1));
  const __m256i under = _mm256_cmpgt_epi32(_mm256_setzero_si256(), d);  // bucket 0: key < a0
  const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(t.shift));
  __m256i idx = _mm256_andnot_si256(under, _mm256_add_epi32(_mm256_srl_epi32(d, shift), _mm256_set1_epi32(1)));
  const __m256i low = _mm256_blendv_epi8(_mm256_and_si256(d, mask), _mm256_min_epi32(key, mask), under);
  // Negatives: entry half + idx, or the one entry [half].
  const __m256i neg = _mm256_srai_epi32(b, 31);
  const __m256i one_entry = _mm256_set1_epi32(t.negatives_one_entry ? -1 : 0);
  idx = _mm256_add_epi32(_mm256_andnot_si256(_mm256_and_si256(neg, one_entry), idx),
                         _mm256_and_si256(neg, _mm256_set1_epi32(static_cast<int>(t.half))));
  const __m256i e = _mm256_i32gather_epi32(reinterpret_cast<const int*>(t.entry), idx, 4);
  const __m256i change = _mm256_and_si256(e, _mm256_set1_epi32(0xFFFFF));
  const __m256i delta = _mm256_srai_epi32(_mm256_slli_epi32(e, 8), 28);
  return _mm256_add_epi32(_mm256_srli_epi32(e, 24), _mm256_and_si256(_mm256_cmpgt_epi32(low, change), delta));
}

// 16 codes (each 0..255 in a 32-bit lane) to bytes in order.
OCTET_TARGET_AVX2 static inline void store_codes_avx2(__m256i c0, __m256i c1, uint8_t* codes) {
  // [c0 lo, c1 lo, c0 hi, c1 hi] as u16 per 128-bit lane, then bytes; fix the lane order.
  __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(c0, c1), 0xD8);
  __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), b);
}

OCTET_TARGET_AVX2 void encode_table_avx2(const float* x, int64_t n, float absmax, const CodeTable& table,
                                         uint8_t* codes) {
  const __m256 a = _mm256_set1_ps(absmax);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    store_codes_avx2(table_codes_avx2(x + i, a, table), table_codes_avx2(x + i + 8, a, table), codes + i);
  }
  encode_table_portable(x + i, n - i, absmax, table, codes + i);
}

// map[code] * absmax for 8 codes at a time: 8 scalar loads from one 64-bit word of codes, then one
// vector multiply (the same float multiply as the portable loop, so the same bits). On Zen 1 this
// takes 0.43 ns per element against 0.65 for the compiler's loop and 1.3 for vgatherdps.
OCTET_TARGET_AVX2 void decode_avx2(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  const __m256 a = _mm256_set1_ps(absmax);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, codes + i, sizeof w);
    const __m256 v = _mm256_setr_ps(map[w & 255], map[(w >> 8) & 255], map[(w >> 16) & 255], map[(w >> 24) & 255],
                                    map[(w >> 32) & 255], map[(w >> 40) & 255], map[(w >> 48) & 255], map[w >> 56]);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(v, a));
  }
  decode_portable(codes + i, n - i, absmax, map, out + i);
}

// ---- AVX-512: 16 lanes, the whole tree in registers

OCTET_TARGET_AVX512 float absmax_avx512(const float* x, int64_t n) {
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 a0 = _mm512_abs_ps(_mm512_loadu_ps(x + i));
    __m512 a1 = _mm512_abs_ps(_mm512_loadu_ps(x + i + 16));
    m0 = _mm512_mask_max_ps(m0, _mm512_cmp_ps_mask(a0, inf, _CMP_LT_OQ), m0, a0);
    m1 = _mm512_mask_max_ps(m1, _mm512_cmp_ps_mask(a1, inf, _CMP_LT_OQ), m1, a1);
  }
  float m = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
  float tail = absmax_portable(x + i, n - i);
  return tail > m ? tail : m;
}

struct TreeRegs512 {
  __m512 r[16];  // node[16 * i .. 16 * i + 16)
};

OCTET_TARGET_AVX512 static inline __m512i step_avx512(__m512 v, __m512 t, __m512i k) {
  __mmask16 gt = _mm512_cmp_ps_mask(v, t, _CMP_GT_OQ);
  __m512i k2 = _mm512_add_epi32(k, k);
  return _mm512_mask_add_epi32(k2, gt, k2, _mm512_set1_epi32(1));
}

// The tree node of level 6..8 for each lane's k: bits 0-4 of k index a register pair (vpermt2ps),
// bits 5 and 6 pick the pair.
OCTET_TARGET_AVX512 static inline __m512 node_hi_avx512(__m512i k, const __m512* r, int pairs) {
  __m512 p0 = _mm512_permutex2var_ps(r[0], k, r[1]);
  if (pairs == 1) return p0;
  __mmask16 b5 = _mm512_test_epi32_mask(k, _mm512_set1_epi32(32));
  __m512 lo = _mm512_mask_blend_ps(b5, p0, _mm512_permutex2var_ps(r[2], k, r[3]));
  if (pairs == 2) return lo;
  __m512 hi = _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(r[4], k, r[5]), _mm512_permutex2var_ps(r[6], k, r[7]));
  return _mm512_mask_blend_ps(_mm512_test_epi32_mask(k, _mm512_set1_epi32(64)), lo, hi);
}

// Codes of U vectors at once: U independent dependency chains keep the pipelines full.
template <int U>
OCTET_TARGET_AVX512 static inline void codes_avx512(const float* x, __m512 absmax, const TreeRegs512& t,
                                                    uint8_t* codes) {
  __m512 v[U];
  __m512i k[U];
  for (int u = 0; u < U; ++u) {
    v[u] = _mm512_div_ps(_mm512_loadu_ps(x + 16 * u), absmax);
    v[u] = _mm512_mask_mov_ps(v[u], _mm512_cmp_ps_mask(v[u], v[u], _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
    k[u] = _mm512_set1_epi32(1);
  }
  for (int level = 0; level < 4; ++level) {  // nodes 1..15
    for (int u = 0; u < U; ++u) k[u] = step_avx512(v[u], _mm512_permutexvar_ps(k[u], t.r[0]), k[u]);
  }
  for (int u = 0; u < U; ++u) k[u] = step_avx512(v[u], _mm512_permutexvar_ps(k[u], t.r[1]), k[u]);  // 16..31
  for (int u = 0; u < U; ++u) k[u] = step_avx512(v[u], node_hi_avx512(k[u], t.r + 2, 1), k[u]);     // 32..63
  for (int u = 0; u < U; ++u) k[u] = step_avx512(v[u], node_hi_avx512(k[u], t.r + 4, 2), k[u]);     // 64..127
  for (int u = 0; u < U; ++u) k[u] = step_avx512(v[u], node_hi_avx512(k[u], t.r + 8, 4), k[u]);     // 128..255
  for (int u = 0; u < U; ++u) {  // k = 256 + code: truncation to bytes keeps the code
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + 16 * u), _mm512_cvtepi32_epi8(k[u]));
  }
}

OCTET_TARGET_AVX512 void encode_avx512(const float* x, int64_t n, float absmax, const SearchTree& tree,
                                       uint8_t* codes) {
  const __m512 a = _mm512_set1_ps(absmax);
  TreeRegs512 t;
  for (int i = 0; i < 16; ++i) t.r[i] = _mm512_load_ps(tree.node + 16 * i);
  int64_t i = 0;
  for (; i + 16 * 8 <= n; i += 16 * 8) codes_avx512<8>(x + i, a, t, codes + i);
  for (; i + 16 <= n; i += 16) codes_avx512<1>(x + i, a, t, codes + i);
  encode_portable(x + i, n - i, absmax, tree, codes + i);
}

// map[code] * absmax for 16 codes at a time: the 256-entry map sits in 16 registers; vpermt2ps
// looks up 32 entries by the code's low 5 bits in each of the 8 register pairs, and bits 5, 6, 7
// pick the pair (7 blends). The same float multiply as the portable loop, so the same bits.
OCTET_TARGET_AVX512 void decode_avx512(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(map + 16 * i);
  const __m512 a = _mm512_set1_ps(absmax);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i k = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    const __mmask16 b5 = _mm512_test_epi32_mask(k, _mm512_set1_epi32(32));
    const __mmask16 b6 = _mm512_test_epi32_mask(k, _mm512_set1_epi32(64));
    const __mmask16 b7 = _mm512_test_epi32_mask(k, _mm512_set1_epi32(128));
    __m512 pair[8];
    for (int j = 0; j < 8; ++j) pair[j] = _mm512_permutex2var_ps(r[2 * j], k, r[2 * j + 1]);
    const __m512 q0 = _mm512_mask_blend_ps(b5, pair[0], pair[1]), q1 = _mm512_mask_blend_ps(b5, pair[2], pair[3]);
    const __m512 q2 = _mm512_mask_blend_ps(b5, pair[4], pair[5]), q3 = _mm512_mask_blend_ps(b5, pair[6], pair[7]);
    const __m512 h0 = _mm512_mask_blend_ps(b6, q0, q1), h1 = _mm512_mask_blend_ps(b6, q2, q3);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mask_blend_ps(b7, h0, h1), a));
  }
  decode_portable(codes + i, n - i, absmax, map, out + i);
}

}  // namespace octet::quant::cpu::detail

#endif  // OCTET_CPU_X86
