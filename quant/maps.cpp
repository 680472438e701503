// The quantization maps and their decision thresholds (formats documented in quant/maps.h).
#include "quant/maps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace octet::quant {
namespace {

std::array<float, 256> to_sorted_table(std::vector<double> values) {
  OCTET_CHECK(values.size() == 256, "quant_map: internal error, built ", values.size(), " values instead of 256");
  std::sort(values.begin(), values.end());
  std::array<float, 256> table{};
  for (size_t i = 0; i < 256; ++i) table[i] = static_cast<float>(values[i]);
  return table;
}

// The reference's dynamic maps (bitsandbytes create_dynamic_map; torchao's copy for its 4-bit
// maps), computed as it computes them, in float32, for `exponent_bits` decades: decade
// k = 0..exponent_bits-1, scale 10^(k - exponent_bits + 1), holds the midpoints of neighbouring
// points of linspace(0.1, 1, n + 1) with n = 2^k (signed, each with its negative) or 2^(k+1)
// (unsigned); then 0 and 1.0 (2^(exponent_bits+1) values: 256 at 7 decades, 16 at 3). torch's
// float32 linspace is start + step * i for the first half of the points and end - step * (n - i)
// for the rest, each a fused multiply-add; the midpoint and the scaling round in float (the scale
// is rounded to float first).
std::vector<float> reference_dynamic_values(bool is_signed, int exponent_bits) {
  OCTET_CHECK(exponent_bits >= 1 && exponent_bits <= 7, "quant_map: internal error, ", exponent_bits, " decades");
  std::vector<float> values;
  for (int k = 0; k < exponent_bits; ++k) {
    const int points = (is_signed ? 1 << k : 2 << k) + 1;
    const float start = 0.1f, end = 1.0f, step = (end - start) / static_cast<float>(points - 1);
    auto point = [&](int i) {
      return i < points / 2 ? std::fma(step, static_cast<float>(i), start)
                            : std::fma(-step, static_cast<float>(points - 1 - i), end);
    };
    static constexpr double kPowersOfTen[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};  // 10^(k - 6)
    const auto scale = static_cast<float>(kPowersOfTen[k + 7 - exponent_bits]);
    for (int j = 0; j + 1 < points; ++j) {
      const float value = scale * ((point(j) + point(j + 1)) / 2.0f);
      values.push_back(value);
      if (is_signed) values.push_back(-value);
    }
  }
  values.push_back(0.0f);
  values.push_back(1.0f);
  std::sort(values.begin(), values.end());
  return values;
}

std::array<float, 256> build_reference_dynamic(bool is_signed) {
  const std::vector<float> values = reference_dynamic_values(is_signed, 7);
  OCTET_CHECK(values.size() == 256, "quant_map: internal error, built ", values.size(), " values instead of 256");
  std::array<float, 256> table{};
  std::copy(values.begin(), values.end(), table.begin());
  return table;
}

std::array<float, 256> build_linear() {
  std::vector<double> values{-1.0};  // repeated so the table has 256 entries
  for (int i = -127; i <= 127; ++i) values.push_back(double(i) / 127.0);
  return to_sorted_table(std::move(values));
}

}  // namespace

std::string_view quant_map_name(QuantMap map) {
  switch (map) {
    case QuantMap::dynamic_signed:
      return "dynamic_signed";
    case QuantMap::dynamic_unsigned:
      return "dynamic_unsigned";
    case QuantMap::linear:
      return "linear";
    case QuantMap::dynamic_unsigned_nonzero:
      return "dynamic_unsigned_nonzero";
  }
  return "?";
}

const std::array<float, 256>& quant_map(QuantMap map) {
  static const std::array<float, 256> dynamic_signed = build_reference_dynamic(true);
  static const std::array<float, 256> dynamic_unsigned = build_reference_dynamic(false);
  static const std::array<float, 256> linear = build_linear();
  // The same values in a table of its own: its address selects the nonzero rule (maps.h).
  static const std::array<float, 256> dynamic_unsigned_nonzero = build_reference_dynamic(false);
  switch (map) {
    case QuantMap::dynamic_signed:
      return dynamic_signed;
    case QuantMap::dynamic_unsigned:
      return dynamic_unsigned;
    case QuantMap::linear:
      return linear;
    case QuantMap::dynamic_unsigned_nonzero:
      return dynamic_unsigned_nonzero;
  }
  OCTET_FAIL("quant_map: unknown map ", static_cast<int>(map),
             " (expected dynamic_signed, dynamic_unsigned, linear, dynamic_unsigned_nonzero)");
}

namespace {

bool positive_never_zero(const float* map) { return map == quant_map(QuantMap::dynamic_unsigned_nonzero).data(); }

// The index of the map's (last) 0 entry, or -1.
int zero_index(const float* map) {
  int z = -1;
  for (int i = 0; i < 256; ++i)
    if (map[i] == 0.0f) z = i;
  return z;
}

// The index of the entry of map[0..n) nearest to v: the lowest on a tie, NaN as 0, +-inf as the
// end entries. Differences of two floats of similar magnitude (or with one of them 0) are exact in
// double, and those are the only ones whose order could be close: the comparison is exact.
int nearest_index(const float* map, int n, float v) {
  if (std::isnan(v)) v = 0.0f;
  v = std::clamp(v, map[0], map[n - 1]);  // +-inf -> the end entries; finite v keep their nearest
  int best = 0;
  double best_dist = std::fabs(double(v) - double(map[0]));
  for (int i = 1; i < n; ++i) {
    double d = std::fabs(double(v) - double(map[i]));
    if (d < best_dist) {  // strict: the lowest index wins a tie
      best = i;
      best_dist = d;
    }
  }
  return best;
}

// The largest float <= the midpoint of a and b (exact in double for the maps documented).
float lower_midpoint(float a, float b) {
  const double mid = (double(a) + double(b)) * 0.5;
  float f = static_cast<float>(mid);
  if (double(f) > mid) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

}  // namespace

uint8_t nearest_code(const float* map, float v) {
  int best = nearest_index(map, 256, v);
  if (v > 0.0f && map[best] == 0.0f && positive_never_zero(map)) ++best;
  return static_cast<uint8_t>(best);
}

const QuantMap* builtin_map(const float* map) {
  static const auto tables = [] {
    std::array<const float*, std::size(kAllQuantMaps)> t{};
    for (size_t i = 0; i < t.size(); ++i) t[i] = quant_map(kAllQuantMaps[i]).data();
    return t;
  }();
  for (size_t i = 0; i < tables.size(); ++i) {
    if (tables[i] == map) return &kAllQuantMaps[i];
  }
  return nullptr;
}

uint8_t nearest_code(const std::array<float, 256>& map, float v) { return nearest_code(map.data(), v); }

Thresholds compute_thresholds(const float* map) {
  Thresholds t{};
  for (int i = 0; i < 255; ++i) t[i] = lower_midpoint(map[i], map[i + 1]);
  // A repeated entry's second index gets an empty range: its lower threshold moves up to its upper.
  for (int i = 254; i >= 0; --i) {
    if (map[i] == map[i + 1]) t[i] = i == 254 ? std::numeric_limits<float>::infinity() : t[i + 1];
  }
  if (positive_never_zero(map)) {
    const int z = zero_index(map);
    OCTET_CHECK(z >= 0 && z < 255, "compute_thresholds: internal error, the nonzero map has no 0 below its top");
    t[z] = 0.0f;  // v > 0 counts past the 0 entry
  }
  return t;
}

const Thresholds& quant_thresholds(QuantMap map) {
  static const auto all = [] {
    std::array<Thresholds, std::size(kAllQuantMaps)> t{};
    for (QuantMap m : kAllQuantMaps) t[static_cast<size_t>(m)] = compute_thresholds(quant_map(m).data());
    return t;
  }();
  OCTET_CHECK(static_cast<size_t>(map) < all.size(), "quant_thresholds: unknown map ", static_cast<int>(map));
  return all[static_cast<size_t>(map)];
}

// ---- 4-bit maps

std::string_view quant_map_name(QuantMap4 map) {
  switch (map) {
    case QuantMap4::dynamic_signed:
      return "dynamic_signed (4-bit)";
    case QuantMap4::linear_unsigned:
      return "linear_unsigned (4-bit)";
  }
  return "?";
}

const Map4& quant_map4(QuantMap4 map) {
  static const Map4 dynamic_signed = [] {
    const std::vector<float> v = reference_dynamic_values(true, 3);
    OCTET_CHECK(v.size() == 16, "quant_map4: internal error, built ", v.size(), " values instead of 16");
    Map4 m{};
    std::copy(v.begin(), v.end(), m.begin());
    return m;
  }();
  static const Map4 linear_unsigned = [] {
    Map4 m{};
    for (int j = 0; j < 16; ++j) m[j] = static_cast<float>(j + 1) / 16.0f;  // exact
    return m;
  }();
  switch (map) {
    case QuantMap4::dynamic_signed:
      return dynamic_signed;
    case QuantMap4::linear_unsigned:
      return linear_unsigned;
  }
  OCTET_FAIL("quant_map4: unknown map ", static_cast<int>(map), " (expected dynamic_signed, linear_unsigned)");
}

const Thresholds4& quant_thresholds4(QuantMap4 map) {
  static const auto all = [] {
    std::array<Thresholds4, std::size(kAllQuantMaps4)> t{};
    for (QuantMap4 m : kAllQuantMaps4) {
      const Map4& values = quant_map4(m);
      for (int i = 0; i < 15; ++i) t[static_cast<size_t>(m)][i] = lower_midpoint(values[i], values[i + 1]);
    }
    return t;
  }();
  OCTET_CHECK(static_cast<size_t>(map) < all.size(), "quant_thresholds4: unknown map ", static_cast<int>(map));
  return all[static_cast<size_t>(map)];
}

uint8_t nearest_code4(const Map4& map, float v) { return static_cast<uint8_t>(nearest_index(map.data(), 16, v)); }

}  // namespace octet::quant
