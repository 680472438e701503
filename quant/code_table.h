// The code table: nearest-code search as one lookup and one compare, for the block-wise kernels of
// every device (quant/block_code.h reads it; quant/blockwise.h defines the codes).
//   const CodeTable* t = code_table(QuantMap::dynamic_signed);   // null: use the threshold tree
//   uint8_t c = table_code(*t, 0.3f);                             // == nearest_code(map, 0.3f)
//
// A normalized value v is read as its sign and the bits of |v| (its "key": for non-negative floats
// the order of the keys is the order of the values). Keys are clamped to [0, key of 1.0] (no
// threshold of a built-in map lies above 1, so +-inf and 1 share codes), and cut into buckets:
//   bucket 0       keys [0, a0), a0 a power of two at or below the smallest nonzero |threshold|:
//                  at most one code change, between 0 and the smallest subnormal (the nonzero
//                  rule of dynamic_unsigned_nonzero); low = min(key, 2^shift - 1)
//   bucket j >= 1  keys a0 + [(j-1) 2^shift, j 2^shift): the exponent and the top 23 - shift
//                  mantissa bits of |v|; low = the remaining shift bits
// and per sign (negatives: entries [half, 2 half), or the single entry [half] when every v <= 0 has
// the same code, as in the unsigned maps). The builder picks the fewest mantissa bits (5 to 7) at
// which every bucket holds at most one change of code, so each entry is
//   bits 24..31 base  the code at the bucket's first key
//   bits 20..23 delta the (signed) change of code inside the bucket, 0 if none
//   bits  0..19 T     the last low with the base code (0xFFFFF when there is no change)
// and code = base + (low > T ? delta : 0). The builder derives every entry from the thresholds
// (quant/maps.h: code = number of thresholds below v) and checks each bucket's ends and its one
// change, so the table gives nearest_code's answer for every float, not an approximation.
// 4 to 13 KB per built-in map; a map that fits no table has none and the kernels walk the tree.
#pragma once

#include <cstdint>

#include "quant/maps.h"

namespace octet::quant {

struct CodeTable {
  static constexpr int kCapacity = 4096;
  static constexpr uint32_t kNoChange = 0xFFFFF;
  uint32_t a0 = 0;                     // first key of bucket 1
  uint32_t a1 = 0x3F800000u;           // key of 1.0f; larger keys count as it
  uint32_t shift = 0;                  // low bits per bucket
  uint32_t half = 0;                   // buckets per sign
  uint32_t negatives_one_entry = 0;    // 1: every v <= 0 reads entry[half]
  uint32_t entry[kCapacity] = {};
};

// The table of `thresholds` (false if no table of kCapacity entries represents it exactly).
bool build_code_table(const Thresholds& thresholds, CodeTable& table);
// The cached table of a built-in map, or null if it has none (every built-in map has one today; the
// kernels still fall back to the threshold tree for null).
const CodeTable* code_table(QuantMap map);
// The same for a map given by its values: the built-in map's table when `map` is one of
// quant_map(...).data(), else null.
const CodeTable* code_table(const float* map);

}  // namespace octet::quant
