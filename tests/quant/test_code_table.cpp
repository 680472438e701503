// The code tables (quant/code_table.h): every built-in map has one, and table_code gives
// nearest_code's answer at every threshold and its neighbouring floats, at every bucket edge, on a
// sweep of all floats in [-1, 1] (every 1021st bit pattern) and on non-finite values; a table that
// cannot hold a map is refused. The kernels' use of it is checked per ISA in test_blockwise.cpp.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "quant/block_code.h"
#include "quant/code_table.h"
#include "quant/maps.h"

namespace octet::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// v and its 4 neighbouring floats on each side, both signs.
void add_neighbourhood(std::vector<float>& out, float v) {
  for (float s : {v, -v}) {
    float lo = s;
    for (int k = 0; k < 4; ++k) lo = std::nextafter(lo, -kInf);
    for (int k = 0; k < 9; ++k, lo = std::nextafter(lo, kInf)) out.push_back(lo);
  }
}

TEST(QuantCodeTable, EveryBuiltInMapHasOneThatGivesNearestCode) {
  for (QuantMap q : kAllQuantMaps) {
    SCOPED_TRACE(std::string(quant_map_name(q)));
    const CodeTable* t = code_table(q);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t, code_table(quant_map(q).data()));
    const float* map = quant_map(q).data();
    std::vector<float> hard{0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                            1e-30f, -1e-30f, 2.0f, -2.0f, std::numeric_limits<float>::max()};
    for (float th : quant_thresholds(q)) add_neighbourhood(hard, th);
    for (int i = 0; i < 256; ++i) add_neighbourhood(hard, map[i]);
    // Bucket edges: a0 and every multiple of 2^shift above it, up to 1.0.
    for (uint32_t key = t->a0; key <= t->a1; key += 1u << t->shift) add_neighbourhood(hard, from_bits(key));
    for (float v : hard) ASSERT_EQ(table_code(*t, v), nearest_code(map, v)) << v;
    // Every 1021st float in [-1, 1] (either sign: keys 0 .. key of 1.0): ~1M per sign, a prime stride so
    // the samples fall at every offset within the buckets. The neighbourhoods above already hold every
    // float where the answer changes; a stride of 61 took 64 s here and 265 s under ASan.
    for (uint32_t key = 0; key <= t->a1; key += 1021) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        const float v = from_bits(key | sign);
        ASSERT_EQ(table_code(*t, v), nearest_code(map, v)) << v;
      }
    }
  }
}

TEST(QuantCodeTable, TablesAreSmall) {
  for (QuantMap q : kAllQuantMaps) {
    const CodeTable* t = code_table(q);
    ASSERT_NE(t, nullptr);
    const uint32_t used = t->half + (t->negatives_one_entry ? 1 : t->half);
    EXPECT_LE(used * 4, 16u * 1024) << quant_map_name(q);  // fits a core's L1 beside the block
  }
  // The unsigned maps have no negative entries: every v <= 0 shares one entry.
  EXPECT_EQ(code_table(QuantMap::dynamic_unsigned)->negatives_one_entry, 1u);
  EXPECT_EQ(code_table(QuantMap::dynamic_signed)->negatives_one_entry, 0u);
}

TEST(QuantCodeTable, RefusesMapsThatDoNotFit) {
  CodeTable t;
  // 255 thresholds within one bucket: a table with at most one change per bucket cannot hold them.
  Thresholds crowded{};
  for (int i = 0; i < 255; ++i) crowded[i] = 0.5f + static_cast<float>(i) * 1e-7f;
  EXPECT_FALSE(build_code_table(crowded, t));
  Thresholds unsorted = quant_thresholds(QuantMap::dynamic_signed);
  std::swap(unsorted[3], unsorted[200]);
  EXPECT_FALSE(build_code_table(unsorted, t));
  EXPECT_EQ(code_table(static_cast<const float*>(nullptr)), nullptr);
  std::array<float, 256> copy = quant_map(QuantMap::dynamic_signed);
  EXPECT_EQ(code_table(copy.data()), nullptr);  // not a built-in table: the kernels walk the tree
  EXPECT_TRUE(build_code_table(compute_thresholds(copy.data()), t));
}

}  // namespace
}  // namespace octet::quant
