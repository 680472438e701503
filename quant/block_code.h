// The per-element steps of block-wise quantization (definition in quant/blockwise.h), written once
// for the CPU kernels and the CUDA kernels (OCTET_HD), so both give the same codes and absmax bit
// for bit: the same finite-only absmax, the same IEEE division and the same walk down the same
// code search: the code table where the map has one (quant/code_table.h), else the threshold tree
// (quant/cpu/blockwise.h: thresholds in Eytzinger order, node[1..255]); both give nearest_code.
//   float m = 0;  for (i...) m = absmax_step(m, x[i]);
//   uint8_t c = table_code(table, normalized(x[i], m));
//   uint8_t c = static_cast<uint8_t>(tree_code(tree.node, normalized(x[i], m)));
//   float back = decode(map, c, m);
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"
#include "quant/code_table.h"

namespace octet::quant {

// The running absmax after element x: |x| counts only when finite (false for NaN and inf).
OCTET_HD inline float absmax_step(float m, float x) {
  const float a = std::fabs(x);
  return a < INFINITY && m < a ? a : m;
}

// x / absmax in float (IEEE division, not a reciprocal); NaN (0/0 of an all-zero block, a NaN
// element) -> 0.
OCTET_HD inline float normalized(float x, float absmax) {
  const float v = x / absmax;
  return std::isnan(v) ? 0.0f : v;
}

// The code of a normalized value: k = 2k + (v > node[k]) for 8 levels from k = 1 ends at
// k = 256 + code, the number of thresholds below v.
OCTET_HD inline unsigned tree_code(const float* node, float v) {
  unsigned k = 1;
  for (int level = 0; level < 8; ++level) k = 2 * k + (v > node[k] ? 1u : 0u);
  return k - 256;
}

// The bits of a float.
OCTET_HD inline uint32_t float_bits(float v) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
#endif
}

// A code table's header in locals (registers in a loop: a store of a code through uint8_t* may
// alias anything, and would make the compiler reload fields of the table itself).
struct CodeTableKeys {
  uint32_t a0, a1, shift, half, negatives_one_entry;
  const uint32_t* entry;
};
OCTET_HD inline CodeTableKeys keys_of(const CodeTable& t) {
  return {t.a0, t.a1, t.shift, t.half, t.negatives_one_entry, t.entry};
}

// The code of a normalized value from its code table (layout in quant/code_table.h); NaN -> the
// code of 0, as normalized() gives. Branch-free (masks, as the AVX2 kernel computes it): signs and
// magnitudes vary at random, and a mispredicted branch costs more than the whole lookup.
OCTET_HD inline uint8_t table_code(const CodeTableKeys& t, float v) {
  const uint32_t b = float_bits(v != v ? 0.0f : v);
  const uint32_t magnitude = b & 0x7FFFFFFFu;
  const uint32_t key = magnitude < t.a1 ? magnitude : t.a1;
  const uint32_t mask = (1u << t.shift) - 1;
  const uint32_t regular = 0u - static_cast<uint32_t>(key >= t.a0);  // all ones outside bucket 0
  const uint32_t d = key - t.a0;
  uint32_t idx = ((d >> t.shift) + 1) & regular;
  const uint32_t low = (d & mask & regular) | ((key < mask ? key : mask) & ~regular);
  const uint32_t negative = 0u - (b >> 31);
  idx = (idx & ~(negative & (0u - t.negatives_one_entry))) + (negative & t.half);
  const uint32_t e = t.entry[idx];
  const uint32_t delta = static_cast<uint32_t>(static_cast<int32_t>(e << 8) >> 28);
  return static_cast<uint8_t>((e >> 24) + (delta & (0u - static_cast<uint32_t>(low > (e & 0xFFFFFu)))));
}
OCTET_HD inline uint8_t table_code(const CodeTable& t, float v) { return table_code(keys_of(t), v); }

OCTET_HD inline float decode(const float* map, uint8_t code, float absmax) { return map[code] * absmax; }

// ---- 4-bit codes (quant/lowbit.h)

// The code of a normalized value: the number of the 4-bit map's 15 thresholds below it
// (nearest_code4 for non-NaN v). Fifteen compares, branch-free.
OCTET_HD inline unsigned code4(const float* thresholds, float v) {
  unsigned c = 0;
  for (int j = 0; j < 15; ++j) c += v > thresholds[j] ? 1u : 0u;
  return c;
}

// The rank-1 scale of element `flat` of a row-major tensor with `dims` extents: the least of
// maxima[d][its index along d] over d.
OCTET_HD inline float rank1_scale(const float* const* maxima, const int64_t* extents, int dims, int64_t flat) {
  float s = INFINITY;
  for (int d = dims - 1; d >= 0; --d) {
    const float m = maxima[d][flat % extents[d]];
    s = m < s ? m : s;
    flat /= extents[d];
  }
  return s;
}

}  // namespace octet::quant
