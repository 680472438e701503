// Quantization maps: 256 sorted float32 values in [-1, 1]; an 8-bit code is an index into one.
// A value v (already normalized by its block's absmax) is stored as the index of the nearest
// map value; dequantization is a table lookup times the absmax (quant/blockwise.h).
//   const auto& m = quant_map(QuantMap::dynamic_signed);
//   uint8_t c = nearest_code(m, 0.3f);   // m[c] == 0.30390625f
//   float back = m[c];
//
// The maps (Dettmers et al., "8-bit optimizers via block-wise quantization", sections 1.3 and 2.2):
//
// dynamic_signed, dynamic_unsigned -- the reference implementation's dynamic tree maps, float for
//   float (bitsandbytes create_dynamic_map(signed=True) / (signed=False); the values it computes in
//   float32 are reproduced exactly and checked against a committed dump, tests/quant/data/). Decade
//   k = 0..6 spans [0.1, 1] * 10^(k-6) and holds the midpoints of 2^k equal steps (signed: each also
//   negated) or 2^(k+1) (unsigned, where the sign bit is one more fraction bit); then 0 and +1.0.
//   Signed: 127 negative values down to -0.99296875 (no -1), 0, 127 positive values from 5.5e-7,
//   and 1.0 -- 256 distinct values. Unsigned: 0, 254 values from 3.25e-7 to 0.99648440, and 1.0.
//   dynamic_signed holds first moments and momenta, dynamic_unsigned second moments.
//
// dynamic_unsigned_nonzero -- the values of dynamic_unsigned with one change to the decision rule:
//   a positive value never gets the code of 0 (it gets at least the smallest positive entry),
//   whatever the nearest entry is. octet's default for 8-bit second moments: a rarely updated
//   element in a block of frequent ones has a normalized second moment below half the smallest
//   entry, which the plain rule stores as 0 while its first moment stays nonzero, and
//   m / (sqrt(0) + eps) explodes; with this rule sqrt(v) keeps at least sqrt(3.25e-7 * absmax), so
//   the update stays bounded. Only the encoding differs: codes decode to the same values, so states
//   written under either rule load under the other. The kernels tell the two apart by the table's
//   address (quant_map returns a separate table for each), the rule itself is in the thresholds
//   (quant_thresholds), so every CPU path and the CUDA kernels follow it without a flag.
//
// linear -- for ablations: i / 127 for i = -127..127 (255 evenly spaced values, step 1/127, with
//   exact -1, 0 and 1, so zeros stay zeros and the map is symmetric; unlike linspace(-1, 1, 256),
//   which has no 0). The 256th entry repeats -1 at index 0.
//
// Duplicates and ties: nearest_code returns the LOWEST index among the nearest entries. So a
// repeated entry is reached only through its first index (linear: -1 -> code 0, code 1 is never
// produced); the unused code still dequantizes to the same value. A value exactly halfway between
// two entries gets the lower one. NaN is treated as 0 (the code of the entry nearest 0); +-inf as
// the largest / smallest entry. For dynamic_unsigned_nonzero, a v > 0 whose nearest entry is 0 gets
// the next code instead.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace octet::quant {

enum class QuantMap : uint8_t { dynamic_signed, dynamic_unsigned, linear, dynamic_unsigned_nonzero };
inline constexpr QuantMap kAllQuantMaps[] = {QuantMap::dynamic_signed, QuantMap::dynamic_unsigned, QuantMap::linear,
                                             QuantMap::dynamic_unsigned_nonzero};

std::string_view quant_map_name(QuantMap map);

// The map's 256 values, ascending; built once (thread-safe), valid for the program's lifetime.
const std::array<float, 256>& quant_map(QuantMap map);

// The built-in map whose table `map` is (one of quant_map(...).data()), or null for any other
// pointer (a map with the same values elsewhere is not built in). Cheap: one static array.
const QuantMap* builtin_map(const float* map);

// Index of the map entry nearest to v (ties, duplicates, NaN and inf as described above). The
// scalar reference: a scan of all 256 entries comparing exact distances. `map` must be ascending
// and finite, with neighbouring entries within a factor 2^29 of each other or one of them 0 (true
// for the built-in maps; it keeps every distance compared here exact in double). The pointer form
// applies dynamic_unsigned_nonzero's rule when `map` is that map's table.
uint8_t nearest_code(const std::array<float, 256>& map, float v);
uint8_t nearest_code(const float* map, float v);

// Decision thresholds of a map for the fast searches: t[i] is the largest float <= the midpoint
// of map[i] and map[i+1], so for any non-NaN v
//     nearest_code(map, v) == number of i with v > t[i]
// (the lower entry wins a tie; a repeated entry's threshold is moved up to the next one so its
// second index has an empty range, +inf at the top end). Non-decreasing; the same table any
// device's kernels must use to reproduce the CPU codes bit for bit. For dynamic_unsigned_nonzero
// the threshold above its 0 entry is 0 itself, so any v > 0 counts past it.
using Thresholds = std::array<float, 255>;
Thresholds compute_thresholds(const float* map);
const Thresholds& quant_thresholds(QuantMap map);  // cached for the built-in maps

// ---- 4-bit maps (Li et al., "Memory Efficient Optimizers with 4-bit States", NeurIPS 2023, and
// torchao's AdamW4bit, which use them): 16 ascending values; codes are packed two per byte
// (quant/lowbit.h). Nearest code, ties, NaN and inf as for the 8-bit maps above.
// dynamic_signed -- create_dynamic_map(signed=True, max_exponent_bits=3, total_bits=4) as the
//   8-bit maps are built, in float32: the decades 10^-2, 10^-1, 1 with 1, 2 and 4 midpoints and
//   their negatives, then 0 and 1.0: -0.8875 .. -0.0055, 0, 0.0055 .. 0.8875, 1. First moments.
// linear_unsigned -- (j + 1) / 16 for j = 0..15 (torchao's linspace(0, 1, 17)[1:]). No 0: the
//   paper's fix of the zero-point problem. A second moment is stored as at least 1/16 of its
//   scale (0 only when the scale is: an all-zero block, row or column), so an element's
//   m / (sqrt(v) + eps) cannot explode after a round trip; small ones are stored too large
//   (a smaller step), never too small.
enum class QuantMap4 : uint8_t { dynamic_signed, linear_unsigned };
inline constexpr QuantMap4 kAllQuantMaps4[] = {QuantMap4::dynamic_signed, QuantMap4::linear_unsigned};
using Map4 = std::array<float, 16>;
using Thresholds4 = std::array<float, 15>;
std::string_view quant_map_name(QuantMap4 map);
const Map4& quant_map4(QuantMap4 map);
// As compute_thresholds: nearest_code4(map, v) == the number of i with v > t[i], for non-NaN v.
const Thresholds4& quant_thresholds4(QuantMap4 map);
// The scalar reference: a scan of the 16 entries comparing exact distances.
uint8_t nearest_code4(const Map4& map, float v);

}  // namespace octet::quant
