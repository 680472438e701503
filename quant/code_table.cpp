// The code tables (format in quant/code_table.h), derived from the decision thresholds.
#include "quant/code_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>

#include "quant/block_code.h"

namespace octet::quant {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The code of the float with sign `negative` and magnitude bits `key`: the number of thresholds
// below it (quant/maps.h).
int code_of(const Thresholds& t, bool negative, uint32_t key) {
  const float v = from_bits(key | (negative ? 0x80000000u : 0u));
  return static_cast<int>(std::lower_bound(t.begin(), t.end(), v) - t.begin());
}

// Fills the entries of one sign with `shift` low bits; false if a bucket changes code more than
// once or by more than a 4-bit delta.
bool fill_sign(const Thresholds& t, bool negative, CodeTable& table, uint32_t* out) {
  const uint32_t mask = (1u << table.shift) - 1;
  for (uint32_t j = 0; j < table.half; ++j) {
    // Bucket j's keys: [0, a0) for j = 0, else a0 + [(j-1) 2^shift, j 2^shift), up to a1.
    const uint32_t first = j == 0 ? 0 : table.a0 + ((j - 1) << table.shift);
    const uint32_t last = j == 0 ? table.a0 - 1 : std::min(first + mask, table.a1);
    const int c0 = code_of(t, negative, first), c1 = code_of(t, negative, last);
    uint32_t change = CodeTable::kNoChange;
    if (c0 != c1) {
      uint32_t lo = first, hi = last;  // the last key with code c0: code_of(lo) == c0 != code_of(hi)
      while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        (code_of(t, negative, mid) == c0 ? lo : hi) = mid;
      }
      if (code_of(t, negative, lo + 1) != c1 || c1 - c0 < -8 || c1 - c0 > 7) return false;
      // Bucket 0 reads low = min(key, mask): its one change may only be right after key 0.
      if (j == 0 && lo != 0) return false;
      change = j == 0 ? 0 : lo - first;
    }
    out[j] = static_cast<uint32_t>(c0) << 24 | (static_cast<uint32_t>(c1 - c0) & 15u) << 20 | change;
  }
  // Keys above a1 (|v| > 1, +-inf) are read as a1.
  return code_of(t, negative, 0x7F800000u) == code_of(t, negative, table.a1);
}

bool build_with_shift(const Thresholds& t, uint32_t shift, CodeTable& table) {
  float smallest = 1.0f;
  for (float x : t) {
    if (x != 0.0f && std::fabs(x) < smallest) smallest = std::fabs(x);
  }
  int exponent = 0;
  std::frexp(smallest, &exponent);  // smallest = f 2^exponent, f in [0.5, 1)
  table.a0 = float_bits(std::ldexp(1.0f, exponent - 1));
  table.shift = shift;
  table.half = ((table.a1 - table.a0) >> shift) + 2;  // bucket 0, the regular buckets, 1.0's bucket
  table.negatives_one_entry = code_of(t, true, 0) == code_of(t, true, 0x7F800000u) ? 1 : 0;
  const uint32_t entries = table.half + (table.negatives_one_entry ? 1 : table.half);
  if (entries > CodeTable::kCapacity) return false;
  std::fill(std::begin(table.entry), std::end(table.entry), 0u);
  if (!fill_sign(t, false, table, table.entry)) return false;
  if (table.negatives_one_entry) {
    table.entry[table.half] = static_cast<uint32_t>(code_of(t, true, 0)) << 24 | CodeTable::kNoChange;
    return true;
  }
  return fill_sign(t, true, table, table.entry + table.half);
}

}  // namespace

bool build_code_table(const Thresholds& thresholds, CodeTable& table) {
  if (!std::is_sorted(thresholds.begin(), thresholds.end())) return false;
  for (uint32_t mantissa_bits = 5; mantissa_bits <= 7; ++mantissa_bits) {
    if (build_with_shift(thresholds, 23 - mantissa_bits, table)) return true;
  }
  return false;
}

const CodeTable* code_table(QuantMap map) {
  struct Cached {
    CodeTable table;
    bool ok = false;
  };
  static const auto* all = [] {
    auto* t = new std::array<Cached, std::size(kAllQuantMaps)>();  // process lifetime, as quant_map's
    for (QuantMap m : kAllQuantMaps) {
      Cached& c = (*t)[static_cast<size_t>(m)];
      c.ok = build_code_table(quant_thresholds(m), c.table);
    }
    return t;
  }();
  const Cached& c = all->at(static_cast<size_t>(map));
  return c.ok ? &c.table : nullptr;
}

const CodeTable* code_table(const float* map) {
  const QuantMap* m = builtin_map(map);
  return m != nullptr ? code_table(*m) : nullptr;
}

}  // namespace octet::quant
