// Quantization maps (quant/maps.h): shape of each table, documented values, nearest_code's ties,
// duplicates and non-finite inputs, and that the decision thresholds reproduce nearest_code.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

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
    // linear repeats -1 (the format has 255 values); the others have 256.
    EXPECT_EQ(repeats, q == QuantMap::linear ? 1 : 0);
    for (float v : m) EXPECT_TRUE(std::isfinite(v) && v >= -1.0f && v <= 1.0f);
    EXPECT_EQ(&quant_map(q), &m);  // built once
  }
}

// The reference's maps, bit for bit: bitsandbytes' create_dynamic_map(signed=True / False), dumped
// by tests/quant/data/make_bnb_maps.py.
TEST(QuantMaps, DynamicMapsEqualTheReferenceFloatForFloat) {
  std::ifstream in(std::string(OCTET_TESTS_DIR) + "/quant/data/bnb_dynamic_maps.txt");
  ASSERT_TRUE(in) << "tests/quant/data/bnb_dynamic_maps.txt is missing";
  std::string line;
  std::vector<float> ref;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto bits = static_cast<uint32_t>(std::stoul(line.substr(0, 8), nullptr, 16));
    float v;
    std::memcpy(&v, &bits, 4);
    ref.push_back(v);
  }
  ASSERT_EQ(ref.size(), 512u);
  const auto& sm = quant_map(QuantMap::dynamic_signed);
  const auto& um = quant_map(QuantMap::dynamic_unsigned);
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(sm[i]), std::bit_cast<uint32_t>(ref[i])) << "signed " << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(um[i]), std::bit_cast<uint32_t>(ref[256 + i])) << "unsigned " << i;
  }
}

TEST(QuantMaps, DynamicSigned) {
  const auto& m = quant_map(QuantMap::dynamic_signed);
  EXPECT_EQ(m[0], -0.99296875f);  // no -1: the top midpoint, 1 - 0.9/128
  EXPECT_EQ(m[127], 0.0f);
  EXPECT_NEAR(m[128], 5.5e-7, 1e-13);  // decade 10^-6: one midpoint of [0.1, 1] (computed in float)
  EXPECT_EQ(m[254], 0.99296875f);
  EXPECT_EQ(m[255], 1.0f);
  for (int i = 0; i < 127; ++i) EXPECT_EQ(m[254 - i], -m[i]) << i;  // symmetric but for +1
  for (int k = 0; k <= 6; ++k) {
    double hi = std::pow(10.0, -k) * 1.0000001, lo = std::pow(10.0, -k - 1) * 1.0000001;
    EXPECT_EQ(count_in(m, lo, hi), (64 >> k) + (k == 0)) << "decade " << k;  // decade 0 also holds 1.0
  }
  EXPECT_NEAR(m[nearest_code(m, 0.3f)], 0.30390625, 1e-7);  // 0.1 + 0.9 * 14.5/64
}

TEST(QuantMaps, DynamicUnsigned) {
  const auto& m = quant_map(QuantMap::dynamic_unsigned);
  EXPECT_EQ(m[0], 0.0f);
  EXPECT_NEAR(m[1], 3.25e-7, 1e-13);  // decade 10^-6: the midpoints of 2 steps
  EXPECT_NEAR(m[2], 7.75e-7, 1e-13);
  EXPECT_EQ(m[255], 1.0f);
  for (int i = 0; i < 255; ++i) EXPECT_LT(m[i], m[i + 1]) << i;
  for (int k = 0; k <= 6; ++k) {
    double hi = std::pow(10.0, -k) * 1.0000001, lo = std::pow(10.0, -k - 1) * 1.0000001;
    EXPECT_EQ(count_in(m, lo, hi), (128 >> k) + (k == 0)) << "decade " << k;
  }
}

// The same values as the unsigned map in a table of its own; only the rule for positive values
// whose nearest entry is 0 differs (they take the smallest positive entry).
TEST(QuantMaps, DynamicUnsignedNonzero) {
  const auto& u = quant_map(QuantMap::dynamic_unsigned);
  const auto& z = quant_map(QuantMap::dynamic_unsigned_nonzero);
  EXPECT_EQ(u, z);
  EXPECT_NE(&u, &z);
  const float half = u[1] / 2;  // below it the plain rule gives 0
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (float v : {tiny, 1e-30f, 1e-9f, half}) {
    EXPECT_EQ(nearest_code(u, v), 0) << v;
    EXPECT_EQ(nearest_code(z, v), 1) << v;
  }
  for (float v : {0.0f, -0.0f, -1e-9f, -0.5f, std::numeric_limits<float>::quiet_NaN(), -kInf})
    EXPECT_EQ(nearest_code(z, v), 0) << v;
  for (float v : {std::nextafter(half, kInf), u[1], 3e-7f, 0.3f, 1.0f, kInf})
    EXPECT_EQ(nearest_code(z, v), nearest_code(u, v)) << v;
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
  EXPECT_EQ(nearest_code(s, 0.0f), 127);
  EXPECT_EQ(nearest_code(s, -0.0f), 127);
  EXPECT_EQ(nearest_code(s, 2e-7f), 127);  // below half the smallest magnitude, 5.5e-7
  EXPECT_EQ(nearest_code(s, 3e-7f), 128);
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

TEST(QuantMaps, BadMap) {
  EXPECT_THROW(quant_map(static_cast<QuantMap>(std::size(kAllQuantMaps))), Error);
  EXPECT_THROW(quant_thresholds(static_cast<QuantMap>(200)), Error);
}

}  // namespace
}  // namespace octet::quant
