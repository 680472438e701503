// AVX2 and AVX-512 kernels of block-wise quantization (quant/cpu/blockwise.h). Each function is
// compiled for its ISA with __attribute__((target)) and only called after __builtin_cpu_supports
// said yes; tails go to the portable kernels, so results are bit-identical by construction of the
// same search tree, the same IEEE division and the same "v > node" comparison.
#include "quant/cpu/blockwise.h"

#ifdef OCTET_QUANT_X86

// GCC 12's AVX-512 headers build unmasked intrinsics on a self-initialized "undefined" vector,
// which -Wuninitialized reports once inlined here (GCC bug 105593); the values are never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>
#include <limits>

namespace octet::quant::cpu::detail {

#define OCTET_AVX2 __attribute__((target("avx2")))
#define OCTET_AVX512 __attribute__((target("avx512f")))

// ---- AVX2: 8 lanes

OCTET_AVX2 static float hmax_avx2(__m256 m) {
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_shuffle_ps(r, r, 1));
  return _mm_cvtss_f32(r);
}

OCTET_AVX2 float absmax_avx2(const float* x, int64_t n) {
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

// One tree level: k = 2k + (v > t).
OCTET_AVX2 static inline __m256i step_avx2(__m256 v, __m256 t, __m256i k) {
  __m256i gt = _mm256_castps_si256(_mm256_cmp_ps(v, t, _CMP_GT_OQ));  // -1 where v > t
  return _mm256_sub_epi32(_mm256_add_epi32(k, k), gt);
}

OCTET_AVX2 static inline __m256i codes_avx2(__m256 v, const SearchTree& tree, __m256 r0, __m256 r1, __m256 r2,
                                            __m256 r3) {
  v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v);  // NaN -> 0
  __m256i k = _mm256_set1_epi32(1);
  for (int level = 0; level < 3; ++level) k = step_avx2(v, _mm256_permutevar8x32_ps(r0, k), k);  // nodes 1..7
  k = step_avx2(v, _mm256_permutevar8x32_ps(r1, k), k);                                          // 8..15
  __m256 hi = _mm256_castsi256_ps(_mm256_slli_epi32(k, 28));  // bit 3 of k as the sign: 24..31
  k = step_avx2(v, _mm256_blendv_ps(_mm256_permutevar8x32_ps(r2, k), _mm256_permutevar8x32_ps(r3, k), hi), k);
  for (int level = 0; level < 3; ++level) k = step_avx2(v, _mm256_i32gather_ps(tree.node, k, 4), k);  // 32..255
  return _mm256_sub_epi32(k, _mm256_set1_epi32(256));
}

OCTET_AVX2 void encode_avx2(const float* x, int64_t n, float absmax, const SearchTree& tree, uint8_t* codes) {
  const __m256 a = _mm256_set1_ps(absmax);
  const __m256 r0 = _mm256_load_ps(tree.node), r1 = _mm256_load_ps(tree.node + 8);
  const __m256 r2 = _mm256_load_ps(tree.node + 16), r3 = _mm256_load_ps(tree.node + 24);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i c0 = codes_avx2(_mm256_div_ps(_mm256_loadu_ps(x + i), a), tree, r0, r1, r2, r3);
    __m256i c1 = codes_avx2(_mm256_div_ps(_mm256_loadu_ps(x + i + 8), a), tree, r0, r1, r2, r3);
    // [c0 lo, c1 lo, c0 hi, c1 hi] as u16 per 128-bit lane, then bytes; fix the lane order.
    __m256i w = _mm256_packus_epi32(c0, c1);
    w = _mm256_permute4x64_epi64(w, 0xD8);
    __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), b);
  }
  encode_portable(x + i, n - i, absmax, tree, codes + i);
}

OCTET_AVX2 void decode_avx2(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  const __m256 a = _mm256_set1_ps(absmax);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_i32gather_ps(map, idx, 4), a));
  }
  decode_portable(codes + i, n - i, absmax, map, out + i);
}

// ---- AVX-512: 16 lanes, the whole tree in registers

OCTET_AVX512 float absmax_avx512(const float* x, int64_t n) {
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

OCTET_AVX512 static inline __m512i step_avx512(__m512 v, __m512 t, __m512i k) {
  __mmask16 gt = _mm512_cmp_ps_mask(v, t, _CMP_GT_OQ);
  __m512i k2 = _mm512_add_epi32(k, k);
  return _mm512_mask_add_epi32(k2, gt, k2, _mm512_set1_epi32(1));
}

OCTET_AVX512 static inline __m128i codes_avx512(__m512 v, const TreeRegs512& t) {
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
  __m512i k = _mm512_set1_epi32(1);
  for (int level = 0; level < 4; ++level) k = step_avx512(v, _mm512_permutexvar_ps(k, t.r[0]), k);  // 1..15
  k = step_avx512(v, _mm512_permutexvar_ps(k, t.r[1]), k);                                          // 16..31
  k = step_avx512(v, _mm512_permutex2var_ps(t.r[2], k, t.r[3]), k);                                 // 32..63
  // 64..127: bits 0-4 of k index a register pair, bit 5 picks the pair.
  __mmask16 b5 = _mm512_test_epi32_mask(k, _mm512_set1_epi32(32));
  k = step_avx512(
      v, _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(t.r[4], k, t.r[5]), _mm512_permutex2var_ps(t.r[6], k, t.r[7])),
      k);
  // 128..255: bits 5 and 6 pick one of four register pairs.
  b5 = _mm512_test_epi32_mask(k, _mm512_set1_epi32(32));
  __mmask16 b6 = _mm512_test_epi32_mask(k, _mm512_set1_epi32(64));
  __m512 lo =
      _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(t.r[8], k, t.r[9]), _mm512_permutex2var_ps(t.r[10], k, t.r[11]));
  __m512 hi = _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(t.r[12], k, t.r[13]),
                                   _mm512_permutex2var_ps(t.r[14], k, t.r[15]));
  k = step_avx512(v, _mm512_mask_blend_ps(b6, lo, hi), k);
  return _mm512_cvtepi32_epi8(k);  // k = 256 + code: truncation keeps the code
}

OCTET_AVX512 void encode_avx512(const float* x, int64_t n, float absmax, const SearchTree& tree, uint8_t* codes) {
  const __m512 a = _mm512_set1_ps(absmax);
  TreeRegs512 t;
  for (int i = 0; i < 16; ++i) t.r[i] = _mm512_load_ps(tree.node + 16 * i);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i c = codes_avx512(_mm512_div_ps(_mm512_loadu_ps(x + i), a), t);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), c);
  }
  encode_portable(x + i, n - i, absmax, tree, codes + i);
}

OCTET_AVX512 void decode_avx512(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  const __m512 a = _mm512_set1_ps(absmax);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_i32gather_ps(idx, map, 4), a));
  }
  decode_portable(codes + i, n - i, absmax, map, out + i);
}

}  // namespace octet::quant::cpu::detail

#pragma GCC diagnostic pop

#endif  // OCTET_QUANT_X86
