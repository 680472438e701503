// Quantization maps (quant/maps.h): shape of each table, documented values, nearest_code's ties,
// duplicates and non-finite inputs, and that the decision thresholds reproduce nearest_code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "quant/maps.h"

namespace octet::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Entries of `m` in the half-open magnitude band (lo, hi].
int count_in(const std::array<float, 256>& m, double lo, double hi) {
  return static_cast<int>(std::count_if(m.begin(), m.end(), [&](float v) { return v > lo && v <= hi; }));
}

TEST(QuantMaps, SortedWithDocumentedDuplicates) {
  for (QuantMap q : kAllQuantMaps) {
    SCOPED_TRACE(std::string(quant_map_name(q)));
    const auto& m = quant_map(q);
    EXPECT_EQ(m.size(), 256u);
    EXPECT_TRUE(std::is_sorted(m.begin(), m.end()));
    EXPECT_EQ(m[255], 1.0f);
    EXPECT_TRUE(std::find(m.begin(), m.end(), 0.0f) != m.end());
    int repeats = 0;
    for (int i = 0; i < 255; ++i) repeats += m[i] == m[i + 1];
    // dynamic_signed repeats 0, linear repeats -1 (the formats have 255 values); unsigned has 256.
    const bool is_unsigned = q == QuantMap::dynamic_unsigned || q == QuantMap::dynamic_unsigned_nonzero;
    EXPECT_EQ(repeats, is_unsigned ? 0 : 1);
    for (float v : m) EXPECT_TRUE(std::isfinite(v) && v >= -1.0f && v <= 1.0f);
    EXPECT_EQ(&quant_map(q), &m);  // built once
  }
}

TEST(QuantMaps, DynamicSigned) {
  const auto& m = quant_map(QuantMap::dynamic_signed);
  EXPECT_EQ(m[0], -1.0f);
  EXPECT_EQ(m[127], 0.0f);
  EXPECT_EQ(m[128], 0.0f);
  EXPECT_EQ(m[129], 1e-6f);  // smallest magnitude: decade 10^-6 without fraction bits
  EXPECT_EQ(m[130], 5.5e-6f);
  EXPECT_EQ(m[254], 0.9859375f);                                    // 1 - 0.9/64
  for (int i = 0; i < 256; ++i) EXPECT_EQ(m[255 - i], -m[i]) << i;  // symmetric
  // Seven decade bands (0.1, 1] * 10^-k with 64, 32, ..., 1 values: 1e-6 .. 1 plus 0.
  for (int k = 0; k <= 6; ++k) {
    double hi = std::pow(10.0, -k) * 1.0000001, lo = std::pow(10.0, -k - 1) * 1.0000001;
    EXPECT_EQ(count_in(m, lo, hi), 64 >> k) << "decade " << k;
  }
  EXPECT_EQ(count_in(m, 0.0, 1.0), 127);
  EXPECT_NEAR(std::log10(m[255] / m[129]), 6.0, 1e-6);
  EXPECT_EQ(m[nearest_code(m, 0.3f)], 0.296875f);  // 0.1 + 0.9 * 14/64
}

TEST(QuantMaps, DynamicUnsigned) {
  const auto& m = quant_map(QuantMap::dynamic_unsigned);
  EXPECT_EQ(m[0], 0.0f);
  EXPECT_EQ(m[1], 1e-7f);  // the fixed fraction bit of the all-zero exponent run
  EXPECT_EQ(m[2], 5.5e-7f);
  EXPECT_EQ(m[3], 1e-6f);
  EXPECT_EQ(m[254], 0.99296875f);  // 1 - 0.9/128
  for (int i = 0; i < 255; ++i) EXPECT_LT(m[i], m[i + 1]) << i;
  for (int k = 0; k <= 6; ++k) {
    double hi = std::pow(10.0, -k) * 1.0000001, lo = std::pow(10.0, -k - 1) * 1.0000001;
    EXPECT_EQ(count_in(m, lo, hi), 128 >> k) << "decade " << k;
  }
}

// The same values as dynamic_unsigned in a table of its own; only the rule for positive values
// whose nearest entry is 0 differs (they take the smallest positive entry).
TEST(QuantMaps, DynamicUnsignedNonzero) {
  const auto& u = quant_map(QuantMap::dynamic_unsigned);
  const auto& z = quant_map(QuantMap::dynamic_unsigned_nonzero);
  EXPECT_EQ(u, z);
  EXPECT_NE(&u, &z);
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (float v : {tiny, 1e-30f, 1e-9f, 4.9e-8f}) {
    EXPECT_EQ(nearest_code(u, v), 0) << v;
    EXPECT_EQ(nearest_code(z, v), 1) << v;  // 1e-7
  }
  for (float v : {0.0f, -0.0f, -1e-9f, -0.5f, std::numeric_limits<float>::quiet_NaN(), -kInf})
    EXPECT_EQ(nearest_code(z, v), 0) << v;
  for (float v : {5.1e-8f, 1e-7f, 3e-7f, 0.3f, 1.0f, kInf}) EXPECT_EQ(nearest_code(z, v), nearest_code(u, v)) << v;
  const Thresholds& tu = quant_thresholds(QuantMap::dynamic_unsigned);
  const Thresholds& tz = quant_thresholds(QuantMap::dynamic_unsigned_nonzero);
  EXPECT_EQ(tz[0], 0.0f);
  EXPECT_GT(tu[0], 0.0f);
  for (int i = 1; i < 255; ++i) EXPECT_EQ(tz[i], tu[i]) << i;
}

TEST(QuantMaps, Linear) {
  const auto& m = quant_map(QuantMap::linear);
  EXPECT_EQ(m[0], -1.0f);
  EXPECT_EQ(m[1], -1.0f);
  EXPECT_EQ(m[128], 0.0f);  // exact 0, unlike linspace(-1, 1, 256)
  for (int i = -127; i <= 127; ++i) EXPECT_EQ(m[128 + i], static_cast<float>(i / 127.0)) << i;
}

TEST(QuantMaps, NearestCodeTiesDuplicatesNonFinite) {
  const auto& s = quant_map(QuantMap::dynamic_signed);
  const auto& u = quant_map(QuantMap::dynamic_unsigned);
  const auto& l = quant_map(QuantMap::linear);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(nearest_code(s, 0.0f), 127);  // first of the repeated zeros
  EXPECT_EQ(nearest_code(s, -0.0f), 127);
  EXPECT_EQ(nearest_code(s, 4e-7f), 127);
  EXPECT_EQ(nearest_code(s, 6e-7f), 129);
  EXPECT_EQ(nearest_code(s, nan), 127);  // NaN is 0
  EXPECT_EQ(nearest_code(s, kInf), 255);
  EXPECT_EQ(nearest_code(s, -kInf), 0);
  EXPECT_EQ(nearest_code(s, 7.0f), 255);
  EXPECT_EQ(nearest_code(u, -0.5f), 0);
  EXPECT_EQ(nearest_code(u, nan), 0);
  EXPECT_EQ(nearest_code(l, -1.0f), 0);  // first of the repeated -1
  EXPECT_EQ(nearest_code(l, -kInf), 0);
  EXPECT_EQ(nearest_code(l, nan), 128);
  // Exactly halfway (halving is exact) -> the lower entry.
  float mid = l[129] / 2;
  EXPECT_EQ(nearest_code(l, mid), 128);
  EXPECT_EQ(nearest_code(l, std::nextafter(mid, kInf)), 129);
  EXPECT_EQ(nearest_code(l, -mid), 127);
  // Every entry finds itself (the first index of a repeated one).
  for (QuantMap q : kAllQuantMaps) {
    const auto& m = quant_map(q);
    for (int i = 0; i < 256; ++i) {
      int first = static_cast<int>(std::find(m.begin(), m.end(), m[i]) - m.begin());
      EXPECT_EQ(nearest_code(m, m[i]), first) << quant_map_name(q) << " " << i;
    }
  }
}

// number of thresholds below v == nearest_code, on and next to every threshold.
TEST(QuantMaps, ThresholdsReproduceNearestCode) {
  for (QuantMap q : kAllQuantMaps) {
    const auto& m = quant_map(q);
    const Thresholds& t = quant_thresholds(q);
    EXPECT_TRUE(std::is_sorted(t.begin(), t.end()));
    auto count = [&](float v) {
      return static_cast<int>(std::count_if(t.begin(), t.end(), [&](float ti) { return v > ti; }));
    };
    for (int i = 0; i < 255; ++i) {
      for (float v : {t[i], std::nextafter(t[i], kInf), std::nextafter(t[i], -kInf), m[i], m[i + 1]}) {
        if (std::isinf(v)) continue;
        EXPECT_EQ(count(v), nearest_code(m, v)) << quant_map_name(q) << " i=" << i << " v=" << v;
      }
    }
    EXPECT_EQ(compute_thresholds(m.data()), t);
  }
}

TEST(QuantMaps, BadMap) { EXPECT_THROW(quant_map(static_cast<QuantMap>(7)), Error); }

}  // namespace
}  // namespace octet::quant
