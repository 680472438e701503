// CPU kernels of the 4-bit codes (quant/lowbit.h): a plain loop each for encoding and decoding
// (the portable path and the kernels' tails), hand-written AVX2 and AVX-512 kernels (the same
// comparisons and the same float multiply, so the same codes and values; tested against the plain
// path), and the rank-1 maxima and scales, compiled per ISA through cpu::simd_dispatch.
#include "quant/lowbit.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <iterator>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "quant/block_code.h"
#include "quant/cpu/blockwise.h"

#ifdef OCTET_CPU_X86
#include "core/cpu/x86_intrin.h"
#endif

namespace octet::quant {
namespace {

// quant::code4 (quant/block_code.h, shared with the CUDA kernels) on a map's thresholds, inlined.
OCTET_SIMD_INLINE unsigned code4(const Thresholds4& t, float v) { return quant::code4(t.data(), v); }

// The plain loops (the portable path, and the tails of the AVX2 / AVX-512 kernels): codes of a
// chunk into bytes, then packed; unpacked into bytes, then looked up.
constexpr int64_t kChunk = 256;

template <bool kPerElement>
OCTET_SIMD_INLINE void encode_plain(const float* x, int64_t n, const float* scale, float one_scale,
                                    const Thresholds4& t, uint8_t* packed) {
  uint8_t codes[kChunk];
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    for (int64_t i = 0; i < len; ++i)
      codes[i] = static_cast<uint8_t>(code4(t, normalized(x[c0 + i], kPerElement ? scale[c0 + i] : one_scale)));
    for (int64_t i = 0; i + 1 < len; i += 2) packed[(c0 + i) / 2] = static_cast<uint8_t>(codes[i] << 4 | codes[i + 1]);
    if (len % 2 != 0) packed[(c0 + len) / 2] = static_cast<uint8_t>(codes[len - 1] << 4);
  }
}

template <bool kPerElement>
OCTET_SIMD_INLINE void decode_plain(const uint8_t* packed, int64_t n, const float* scale, float one_scale,
                                    const Map4& map, float* out) {
  uint8_t codes[kChunk];
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    for (int64_t i = 0; i < (len + 1) / 2; ++i) {
      codes[2 * i] = packed[c0 / 2 + i] >> 4;
      codes[2 * i + 1] = packed[c0 / 2 + i] & 15u;
    }
    for (int64_t i = 0; i < len; ++i) out[c0 + i] = map[codes[i]] * (kPerElement ? scale[c0 + i] : one_scale);
  }
}

#ifdef OCTET_CPU_X86
// AVX-512: 32 elements a step. The codes by a 4-level walk of the 15 thresholds in one register
// (Eytzinger order, node[k] for k in [1, 16)), the same comparisons as code4; the values by one
// permute of the 16-entry map, then the same float multiply as the plain loop.
struct Tree4 {
  alignas(64) float node[16];
};

// The cached tree of a map's thresholds.
const Tree4& tree4(QuantMap4 map) {
  static const auto trees = [] {
    std::array<Tree4, std::size(kAllQuantMaps4)> all{};
    for (QuantMap4 m : kAllQuantMaps4) {
      const Thresholds4& t = quant_thresholds4(m);
      for (int level = 1; level <= 4; ++level) {
        const int first = 1 << (level - 1), span = 1 << (5 - level);
        for (int j = 0; j < first; ++j) all[static_cast<size_t>(m)].node[first + j] = t[j * span + span / 2 - 1];
      }
    }
    return all;
  }();
  return trees[static_cast<size_t>(map)];
}

OCTET_TARGET_AVX512 inline __m512i codes_avx512(__m512 x, __m512 s, __m512 tree) {
  __m512 v = _mm512_div_ps(x, s);
  v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_setzero_ps());  // NaN -> 0
  __m512i k = _mm512_set1_epi32(1);
  for (int level = 0; level < 4; ++level) {
    const __mmask16 gt = _mm512_cmp_ps_mask(v, _mm512_permutexvar_ps(k, tree), _CMP_GT_OQ);
    k = _mm512_add_epi32(k, k);
    k = _mm512_mask_add_epi32(k, gt, k, _mm512_set1_epi32(1));
  }
  return _mm512_sub_epi32(k, _mm512_set1_epi32(16));
}

// Bytes e[0..16) of two elements each (e[2k] in byte 2k) -> 8 bytes e[2k] << 4 | e[2k + 1], as words.
OCTET_TARGET_AVX512 inline __m128i pair_words(__m128i e) {
  return _mm_or_si128(_mm_slli_epi16(_mm_and_si128(e, _mm_set1_epi16(0xFF)), 4), _mm_srli_epi16(e, 8));
}

template <bool kPerElement>
OCTET_TARGET_AVX512 void encode_avx512(const float* x, int64_t n, const float* scale, float one_scale,
                                       const Thresholds4& t, const Tree4& tr, uint8_t* packed) {
  const __m512 tree = _mm512_load_ps(tr.node), one = _mm512_set1_ps(one_scale);
  int64_t i = 0;
  // kU vectors a step: independent walks, so the pipelines are not waiting on one walk's latency.
  constexpr int kU = 8;
  for (; i + 16 * kU <= n; i += 16 * kU) {
    __m512i k[kU];
    for (int u = 0; u < kU; ++u) {
      const __m512 s = kPerElement ? _mm512_loadu_ps(scale + i + 16 * u) : one;
      k[u] = codes_avx512(_mm512_loadu_ps(x + i + 16 * u), s, tree);
    }
    for (int u = 0; u < kU; u += 2) {
      const __m128i e0 = _mm512_cvtepi32_epi8(k[u]), e1 = _mm512_cvtepi32_epi8(k[u + 1]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + (i + 16 * u) / 2),
                       _mm_packus_epi16(pair_words(e0), pair_words(e1)));
    }
  }
  for (; i + 32 <= n; i += 32) {
    const __m512 s0 = kPerElement ? _mm512_loadu_ps(scale + i) : one;
    const __m512 s1 = kPerElement ? _mm512_loadu_ps(scale + i + 16) : one;
    const __m128i e0 = _mm512_cvtepi32_epi8(codes_avx512(_mm512_loadu_ps(x + i), s0, tree));
    const __m128i e1 = _mm512_cvtepi32_epi8(codes_avx512(_mm512_loadu_ps(x + i + 16), s1, tree));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + i / 2), _mm_packus_epi16(pair_words(e0), pair_words(e1)));
  }
  encode_plain<kPerElement>(x + i, n - i, kPerElement ? scale + i : scale, one_scale, t, packed + i / 2);
}

template <bool kPerElement>
OCTET_TARGET_AVX512 void decode_avx512(const uint8_t* packed, int64_t n, const float* scale, float one_scale,
                                       const Map4& map, float* out) {
  const __m512 m = _mm512_loadu_ps(map.data()), one = _mm512_set1_ps(one_scale);
  // Element 2k is the high nibble of byte k: interleave the high and the low nibbles' values.
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + i / 2)));
    const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), m);
    const __m512 lo = _mm512_permutexvar_ps(_mm512_and_si512(b, _mm512_set1_epi32(15)), m);
    const __m512 s0 = kPerElement ? _mm512_loadu_ps(scale + i) : one;
    const __m512 s1 = kPerElement ? _mm512_loadu_ps(scale + i + 16) : one;
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_permutex2var_ps(hi, first, lo), s0));
    _mm512_storeu_ps(out + i + 16, _mm512_mul_ps(_mm512_permutex2var_ps(hi, second, lo), s1));
  }
  decode_plain<kPerElement>(packed + i / 2, n - i, kPerElement ? scale + i : scale, one_scale, map, out + i);
}

// AVX2: 32 elements a step, the same walk with the tree in two registers: levels 1-3 read nodes
// 1..7 (the low register), level 4 nodes 8..15 (the high one), so no blend is needed.
OCTET_TARGET_AVX2 inline __m256i codes_avx2(__m256 x, __m256 s, __m256 lo, __m256 hi) {
  __m256 v = _mm256_div_ps(x, s);
  v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v);  // NaN -> 0
  __m256i k = _mm256_set1_epi32(1);
  for (int level = 0; level < 4; ++level) {
    const __m256 node = _mm256_permutevar8x32_ps(level < 3 ? lo : hi, k);
    const __m256i gt = _mm256_castps_si256(_mm256_cmp_ps(v, node, _CMP_GT_OQ));  // -1 where v > node
    k = _mm256_sub_epi32(_mm256_add_epi32(k, k), gt);
  }
  return _mm256_sub_epi32(k, _mm256_set1_epi32(16));
}

template <bool kPerElement>
OCTET_TARGET_AVX2 void encode_avx2(const float* x, int64_t n, const float* scale, float one_scale, const Thresholds4& t,
                                   const Tree4& tr, uint8_t* packed) {
  const __m256 lo = _mm256_load_ps(tr.node), hi = _mm256_load_ps(tr.node + 8), one = _mm256_set1_ps(one_scale);
  // Byte lanes after the two packs come in the order 0-3 8-11 16-19 24-27 4-7 ...: this restores it.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i weights = _mm256_set1_epi16(0x0110);  // e[2k] * 16 + e[2k + 1]
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256i c[8];
    for (int u = 0; u < 8; ++u)
      c[u] = codes_avx2(_mm256_loadu_ps(x + i + 8 * u), kPerElement ? _mm256_loadu_ps(scale + i + 8 * u) : one, lo, hi);
    for (int h = 0; h < 2; ++h) {  // 32 codes -> 32 bytes in order -> 16 packed bytes
      const __m256i w01 = _mm256_packus_epi32(c[4 * h], c[4 * h + 1]),
                    w23 = _mm256_packus_epi32(c[4 * h + 2], c[4 * h + 3]);
      const __m256i e = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w01, w23), order);
      const __m256i pairs = _mm256_maddubs_epi16(e, weights);
      const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0xD8);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + (i + 32 * h) / 2), _mm256_castsi256_si128(bytes));
    }
  }
  encode_plain<kPerElement>(x + i, n - i, kPerElement ? scale + i : scale, one_scale, t, packed + i / 2);
}

template <bool kPerElement>
OCTET_TARGET_AVX2 void decode_avx2(const uint8_t* packed, int64_t n, const float* scale, float one_scale,
                                   const Map4& map, float* out) {
  const __m256 m_lo = _mm256_loadu_ps(map.data()), m_hi = _mm256_loadu_ps(map.data() + 8);
  const __m256 one = _mm256_set1_ps(one_scale);
  // map[c] for 8 codes: both halves of the map permuted, bit 3 of c picks one (moved to the sign).
  auto lookup = [&](__m256i c) OCTET_TARGET_AVX2 {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(m_lo, c), _mm256_permutevar8x32_ps(m_hi, c),
                            _mm256_castsi256_ps(_mm256_slli_epi32(c, 28)));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed + i / 2)));
    const __m256 h = lookup(_mm256_srli_epi32(b, 4)), l = lookup(_mm256_and_si256(b, _mm256_set1_epi32(15)));
    // Element 2k is the high nibble of byte k: interleave, then put the 128-bit halves in order.
    const __m256 a = _mm256_unpacklo_ps(h, l), c = _mm256_unpackhi_ps(h, l);
    const __m256 first = _mm256_permute2f128_ps(a, c, 0x20), second = _mm256_permute2f128_ps(a, c, 0x31);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(first, kPerElement ? _mm256_loadu_ps(scale + i) : one));
    _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(second, kPerElement ? _mm256_loadu_ps(scale + i + 8) : one));
  }
  decode_plain<kPerElement>(packed + i / 2, n - i, kPerElement ? scale + i : scale, one_scale, map, out + i);
}
#endif

// The bits of |x| when x is finite, else 0 (absmax_step's rule).
OCTET_SIMD_INLINE uint32_t finite_abs_bits(uint32_t x) {
  const uint32_t a = x & 0x7FFFFFFFu;
  return a & (0u - static_cast<uint32_t>(a < 0x7F800000u));  // a mask, not a branch: it vectorizes
}

}  // namespace

void encode4(const float* x, int64_t n, const float* scale, float one_scale, QuantMap4 map, uint8_t* packed) {
  const Thresholds4& t = quant_thresholds4(map);
#ifdef OCTET_CPU_X86
  if (cpu::active_isa() == cpu::Isa::avx512) {
    return scale != nullptr ? encode_avx512<true>(x, n, scale, one_scale, t, tree4(map), packed)
                            : encode_avx512<false>(x, n, scale, one_scale, t, tree4(map), packed);
  }
  if (cpu::active_isa() == cpu::Isa::avx2) {
    return scale != nullptr ? encode_avx2<true>(x, n, scale, one_scale, t, tree4(map), packed)
                            : encode_avx2<false>(x, n, scale, one_scale, t, tree4(map), packed);
  }
#endif
  const Thresholds4 tv = t;
  if (scale != nullptr) {
    octet::cpu::simd_dispatch([=] { encode_plain<true>(x, n, scale, one_scale, tv, packed); });
  } else {
    octet::cpu::simd_dispatch([=] { encode_plain<false>(x, n, scale, one_scale, tv, packed); });
  }
}

void decode4(const uint8_t* packed, int64_t n, const float* scale, float one_scale, QuantMap4 map, float* out) {
  const Map4& m = quant_map4(map);
#ifdef OCTET_CPU_X86
  if (cpu::active_isa() == cpu::Isa::avx512) {
    return scale != nullptr ? decode_avx512<true>(packed, n, scale, one_scale, m, out)
                            : decode_avx512<false>(packed, n, scale, one_scale, m, out);
  }
  if (cpu::active_isa() == cpu::Isa::avx2) {
    return scale != nullptr ? decode_avx2<true>(packed, n, scale, one_scale, m, out)
                            : decode_avx2<false>(packed, n, scale, one_scale, m, out);
  }
#endif
  const Map4 mv = m;
  if (scale != nullptr) {
    octet::cpu::simd_dispatch([=] { decode_plain<true>(packed, n, scale, one_scale, mv, out); });
  } else {
    octet::cpu::simd_dispatch([=] { decode_plain<false>(packed, n, scale, one_scale, mv, out); });
  }
}

float absmax4(const float* x, int64_t n) { return cpu::block_absmax(cpu::active_isa(), x, n); }

Rank1Maxima::Rank1Maxima(std::span<const int64_t> shape) : shape_(shape.begin(), shape.end()) {
  OCTET_CHECK(shape_.size() >= 2, "rank-1 normalization: a tensor of ", shape_.size(), " dims (it needs >= 2)");
  for (int64_t extent : shape_) bits_.emplace_back(static_cast<size_t>(extent), 0u);
}

void Rank1Maxima::add(int64_t begin, int64_t n, const float* x) {
  const size_t dims = shape_.size();
  const int64_t inner = shape_[dims - 1];
  uint32_t* last = bits_[dims - 1].data();
  for (int64_t i = 0; i < n;) {  // one row segment (elements sharing their leading indices) a step
    const int64_t flat = begin + i, j0 = flat % inner, len = std::min(inner - j0, n - i);
    const float* seg = x + i;
    uint32_t* col = last + j0;
    // On the bits: non-negative floats order as their bits, and integer maxima vectorize.
    const uint32_t seg_max = octet::cpu::simd_dispatch([=] {
      uint32_t m = 0;
      for (int64_t j = 0; j < len; ++j) {
        const uint32_t a = finite_abs_bits(std::bit_cast<uint32_t>(seg[j]));
        col[j] = std::max(col[j], a);
        m = std::max(m, a);
      }
      return m;
    });
    int64_t rest = flat / inner;  // the segment's index along each leading dim, last leading dim first
    for (size_t d = dims - 1; d-- > 0;) {
      uint32_t& b = bits_[d][static_cast<size_t>(rest % shape_[d])];
      b = std::max(b, seg_max);
      rest /= shape_[d];
    }
    i += len;
  }
}

void Rank1Maxima::merge_into(float* const* maxima) const {
  for (size_t d = 0; d < shape_.size(); ++d)
    for (int64_t i = 0; i < shape_[d]; ++i)
      maxima[d][i] = std::max(maxima[d][i], std::bit_cast<float>(bits_[d][static_cast<size_t>(i)]));
}

void rank1_scales(std::span<const int64_t> shape, const float* const* maxima, int64_t begin, int64_t n, float* out) {
  const size_t dims = shape.size();
  OCTET_CHECK(dims >= 2, "rank1_scales: a tensor of ", dims, " dims (rank-1 normalization needs >= 2)");
  const int64_t inner = shape[dims - 1];
  const float* last = maxima[dims - 1];
  int64_t i = 0;
  while (i < n) {
    const int64_t flat = begin + i, j0 = flat % inner;
    // The least of the row's maxima along the leading dims.
    const float outer = rank1_scale(maxima, shape.data(), static_cast<int>(dims) - 1, flat / inner);
    const int64_t len = std::min(inner - j0, n - i);
    float* o = out + i;
    const float* m = last + j0;
    octet::cpu::simd_dispatch([=] {
      for (int64_t j = 0; j < len; ++j) o[j] = std::min(outer, m[j]);
    });
    i += len;
  }
}

}  // namespace octet::quant
