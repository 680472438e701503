// The vectorized Philox runs of core/cpu/philox.h: on AVX2 (and AVX-512 CPUs, which run the same
// code) eight counters per register, the 32 x 32 -> 64-bit products of each round from two
// vpmuludq (even and odd lanes); elsewhere philox_at per counter, the reference.
#include "core/cpu/philox.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/cpu/isa.h"
#include "core/generator.h"

#ifdef OCTET_CPU_X86
#include <immintrin.h>
#endif

namespace octet::cpu {
namespace {

// first is null or receives word 0; out4 is null or receives the four words of each counter.
void philox_portable(uint64_t seed, uint64_t ctr, int64_t blocks, uint32_t* first, uint32_t* out4) {
  for (int64_t b = 0; b < blocks; ++b) {
    const std::array<uint32_t, 4> w = philox_at(seed, ctr, static_cast<uint64_t>(b));
    if (first != nullptr) first[b] = w[0];
    if (out4 != nullptr) std::copy(w.begin(), w.end(), out4 + 4 * b);
  }
}

#ifdef OCTET_CPU_X86

struct Block8 {
  __m256i c0, c1, c2, c3;
};

// hi and lo 32 bits of a * m per lane (m the same in every lane).
OCTET_TARGET_AVX2 inline void mul_wide(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// Counters ctr + 0 .. 8N-1, ten rounds: philox_round on 8N blocks, N registers of 8 interleaved
// (one register's rounds are a chain of dependent multiplies; on a Zen 3, N = 4 measured the same
// as N = 1, the loop being throughput-bound there: kept for cores with longer multiply latency).
template <int N>
OCTET_TARGET_AVX2 inline void philox8(uint64_t seed, uint64_t ctr, Block8* b) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(static_cast<int32_t>(0x80000000u));
  for (int u = 0; u < N; ++u) {
    const uint64_t first = ctr + 8 * static_cast<uint64_t>(u);
    const __m256i base_lo = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first)));
    b[u].c0 = _mm256_add_epi32(base_lo, lane);
    // The low word wrapped (unsigned lo < base): carry one into the high word.
    const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(base_lo, sign), _mm256_xor_si256(b[u].c0, sign));
    b[u].c1 = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first >> 32))), carry);
    b[u].c2 = b[u].c3 = _mm256_setzero_si256();
  }
  const __m256i m0 = _mm256_set1_epi32(static_cast<int32_t>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int32_t>(kPhiloxM1));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r, k0 += kPhiloxW0, k1 += kPhiloxW1) {
    const __m256i key0 = _mm256_set1_epi32(static_cast<int32_t>(k0)),
                  key1 = _mm256_set1_epi32(static_cast<int32_t>(k1));
    for (int u = 0; u < N; ++u) {
      __m256i hi0, lo0, hi1, lo1;
      mul_wide(b[u].c0, m0, hi0, lo0);
      mul_wide(b[u].c2, m1, hi1, lo1);
      const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, b[u].c1), key0);
      const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, b[u].c3), key1);
      b[u].c1 = lo1, b[u].c3 = lo0, b[u].c0 = n0, b[u].c2 = n2;
    }
  }
}

// The four words of eight counters (one Block8) in counter order: [c0 c1 c2 c3] of each.
OCTET_TARGET_AVX2 inline void store_words(const Block8& w, uint32_t* out4) {
  const __m256i a = _mm256_unpacklo_epi32(w.c0, w.c1), c = _mm256_unpackhi_epi32(w.c0, w.c1);
  const __m256i d = _mm256_unpacklo_epi32(w.c2, w.c3), e = _mm256_unpackhi_epi32(w.c2, w.c3);
  const __m256i k0 = _mm256_unpacklo_epi64(a, d), k1 = _mm256_unpackhi_epi64(a, d);  // counters 0, 1 | 4, 5
  const __m256i k2 = _mm256_unpacklo_epi64(c, e), k3 = _mm256_unpackhi_epi64(c, e);  // counters 2, 3 | 6, 7
  __m256i* o = reinterpret_cast<__m256i*>(out4);
  _mm256_storeu_si256(o + 0, _mm256_permute2x128_si256(k0, k1, 0x20));
  _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(k2, k3, 0x20));
  _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(k0, k1, 0x31));
  _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(k2, k3, 0x31));
}

template <int N>
OCTET_TARGET_AVX2 inline void philox_blocks_avx2(uint64_t seed, uint64_t ctr, uint32_t* first, uint32_t* out4) {
  Block8 w[N];
  philox8<N>(seed, ctr, w);
  for (int u = 0; u < N; ++u) {
    if (first != nullptr) _mm256_storeu_si256(reinterpret_cast<__m256i*>(first + 8 * u), w[u].c0);
    if (out4 != nullptr) store_words(w[u], out4 + 32 * u);
  }
}

OCTET_TARGET_AVX2 void philox_avx2(uint64_t seed, uint64_t ctr, int64_t blocks, uint32_t* first, uint32_t* out4) {
  auto at = [&](int64_t b) { return std::pair{first ? first + b : nullptr, out4 ? out4 + 4 * b : nullptr}; };
  int64_t b = 0;
  for (; b + 32 <= blocks; b += 32) {
    const auto [f, o] = at(b);
    philox_blocks_avx2<4>(seed, ctr + static_cast<uint64_t>(b), f, o);
  }
  for (; b + 8 <= blocks; b += 8) {
    const auto [f, o] = at(b);
    philox_blocks_avx2<1>(seed, ctr + static_cast<uint64_t>(b), f, o);
  }
  const auto [f, o] = at(b);
  philox_portable(seed, ctr + static_cast<uint64_t>(b), blocks - b, f, o);
}

#endif

void philox_run(uint64_t seed, uint64_t ctr, int64_t blocks, uint32_t* first, uint32_t* out4) {
#ifdef OCTET_CPU_X86
  if (active_isa() != Isa::portable) return philox_avx2(seed, ctr, blocks, first, out4);
#endif
  philox_portable(seed, ctr, blocks, first, out4);
}

}  // namespace

void philox_words(uint64_t seed, uint64_t ctr, int64_t blocks, uint32_t* out) {
  philox_run(seed, ctr, blocks, nullptr, out);
}

void philox_first_words(uint64_t seed, uint64_t ctr, int64_t blocks, uint32_t* out) {
  philox_run(seed, ctr, blocks, out, nullptr);
}

}  // namespace octet::cpu
