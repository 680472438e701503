// 4-bit codes (quant/lowbit.h, the 4-bit maps of quant/maps.h): the maps against torchao's values,
// the thresholds against the nearest-entry scan, the encode/decode kernels of every ISA against a
// plain reference (odd sizes, per-element and single scales, NaN, inf, zeros, subnormals), the
// packing order, and the rank-1 maxima and scales against plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/octet.h"
#include "quant/lowbit.h"
#include "tests/isa_scope.h"

namespace octet::quant {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr cpu::Isa kIsas[] = {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512};

// Restores the best ISA after a test that switches it.
TEST(Maps4, ValuesAreTorchaosFloatForFloat) {
  // torchao/bitsandbytes create_dynamic_map(signed=True, max_exponent_bits=3, total_bits=4), in
  // torch float32 (tools/bench/map_error.py builds the 8-bit maps the same way).
  const std::vector<float> signed_want = {-0.887499988f,  -0.662500024f,  -0.4375f,        -0.212499991f,
                                          -0.0775000006f, -0.0325000025f, -0.00549999997f, 0.0f,
                                          0.00549999997f, 0.0325000025f,  0.0775000006f,   0.212499991f,
                                          0.4375f,        0.662500024f,   0.887499988f,    1.0f};
  const Map4& s = quant_map4(QuantMap4::dynamic_signed);
  EXPECT_EQ(std::vector<float>(s.begin(), s.end()), signed_want);
  const Map4& u = quant_map4(QuantMap4::linear_unsigned);  // torch.linspace(0, 1, 17)[1:]
  for (int j = 0; j < 16; ++j) EXPECT_EQ(u[j], static_cast<float>(j + 1) / 16.0f);
}

TEST(Maps4, ThresholdsGiveTheNearestEntry) {
  Generator g(5);
  for (QuantMap4 m : kAllQuantMaps4) {
    const Map4& map = quant_map4(m);
    const Thresholds4& t = quant_thresholds4(m);
    std::vector<float> vs = (rand({20000}, DType::f32, &g) * 2.4 - 1.2).to_vector<float>();
    for (int i = 0; i < 16; ++i) {  // the entries, their neighbours and the midpoints exactly
      vs.push_back(map[i]);
      vs.push_back(std::nextafter(map[i], kInf));
      vs.push_back(std::nextafter(map[i], -kInf));
      if (i < 15) {
        vs.push_back(t[i]);
        vs.push_back(std::nextafter(t[i], kInf));
      }
    }
    for (float v : {0.0f, -0.0f, 1e-40f, -1e-40f, kInf, -kInf, 3.0f, -3.0f}) vs.push_back(v);
    for (float v : vs) {
      int below = 0;
      for (float x : t) below += v > x;
      ASSERT_EQ(below, nearest_code4(map, v)) << quant_map_name(m) << " v=" << v;
    }
  }
}

// The reference: each element's code by the 16-entry scan, packed high nibble first.
std::vector<uint8_t> encode_ref(const std::vector<float>& x, const std::vector<float>& scale, float one, QuantMap4 m) {
  std::vector<uint8_t> out(static_cast<size_t>(packed4_bytes(static_cast<int64_t>(x.size()))), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    const float s = scale.empty() ? one : scale[i];
    float v = x[i] / s;
    if (std::isnan(v)) v = 0.0f;
    const uint8_t c = nearest_code4(quant_map4(m), v);
    out[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? c << 4 : c);
  }
  return out;
}

std::vector<float> decode_ref(const std::vector<uint8_t>& packed, size_t n, const std::vector<float>& scale, float one,
                              QuantMap4 m) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int c = i % 2 == 0 ? packed[i / 2] >> 4 : packed[i / 2] & 15;
    out[i] = quant_map4(m)[c] * (scale.empty() ? one : scale[i]);
  }
  return out;
}

TEST(LowBitKernels, EveryIsaMatchesTheReferenceOnOddSizes) {
  octet::testing::IsaScope isa_scope;
  Generator g(11);
  for (int64_t n : {1, 2, 3, 15, 16, 17, 31, 32, 33, 127, 128, 129, 255, 1000}) {
    std::vector<float> x = randn({n}, DType::f32, &g).to_vector<float>();
    std::vector<float> scale = (rand({n}, DType::f32, &g) * 3.0 + 0.01).to_vector<float>();
    // Edge values where they fit: NaN, inf, zeros, a subnormal, exact map entries and thresholds.
    const float edges[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-41f, 0.4375f, -0.0325000025f, 0.5f / 16.0f * 3.0f};
    for (size_t i = 0; i < std::size(edges) && static_cast<int64_t>(i) < n; ++i)
      x[static_cast<size_t>(i) * 7 % x.size()] = edges[i];
    for (QuantMap4 m : kAllQuantMaps4) {
      std::vector<float> xm = x;
      if (m == QuantMap4::linear_unsigned)
        for (float& v : xm) v = std::fabs(v);
      for (bool per_element : {false, true}) {
        const std::vector<float> s = per_element ? scale : std::vector<float>{};
        const float one = 1.7f;
        const std::vector<uint8_t> want = encode_ref(xm, s, one, m);
        const std::vector<float> back_want = decode_ref(want, xm.size(), s, one, m);
        for (cpu::Isa isa : kIsas) {
          if (!cpu::isa_supported(isa)) continue;
          cpu::set_active_isa(isa);
          std::vector<uint8_t> got(want.size(), 0xAB);
          encode4(xm.data(), n, per_element ? s.data() : nullptr, one, m, got.data());
          ASSERT_EQ(got, want) << cpu::isa_name(isa) << " n=" << n << " " << quant_map_name(m);
          std::vector<float> back(xm.size());
          decode4(got.data(), n, per_element ? s.data() : nullptr, one, m, back.data());
          ASSERT_EQ(back, back_want) << cpu::isa_name(isa) << " n=" << n;
        }
      }
    }
  }
}

TEST(LowBitKernels, PackingIsHighNibbleFirst) {
  const float x[3] = {1.0f, 0.0f, -0.887499988f};  // codes 15, 7, 0
  uint8_t packed[2] = {0xFF, 0xFF};
  encode4(x, 3, nullptr, 1.0f, QuantMap4::dynamic_signed, packed);
  EXPECT_EQ(packed[0], 0xF7);
  EXPECT_EQ(packed[1], 0x00);  // the unused low nibble of an odd count is 0
}

TEST(LowBitKernels, AllZeroBlockDecodesToZero) {
  const float x[4] = {0, 0, 0, 0};
  uint8_t packed[2];
  for (QuantMap4 m : kAllQuantMaps4) {
    const float a = absmax4(x, 4);
    EXPECT_EQ(a, 0.0f);
    encode4(x, 4, nullptr, a, m, packed);
    float back[4];
    decode4(packed, 4, nullptr, a, m, back);
    for (float v : back) EXPECT_EQ(v, 0.0f) << quant_map_name(m);
  }
}

// Plain rank-1 maxima and scales of a row-major tensor.
void rank1_ref(const std::vector<float>& x, const std::vector<int64_t>& shape, std::vector<std::vector<float>>& maxima,
               std::vector<float>& scales) {
  maxima.assign(shape.size(), {});
  for (size_t d = 0; d < shape.size(); ++d) maxima[d].assign(static_cast<size_t>(shape[d]), 0.0f);
  auto index = [&](size_t flat, size_t d) {
    int64_t stride = 1;
    for (size_t e = d + 1; e < shape.size(); ++e) stride *= shape[e];
    return static_cast<size_t>((static_cast<int64_t>(flat) / stride) % shape[d]);
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = std::fabs(x[i]);
    if (!(a < kInf)) continue;
    for (size_t d = 0; d < shape.size(); ++d) maxima[d][index(i, d)] = std::max(maxima[d][index(i, d)], a);
  }
  scales.assign(x.size(), kInf);
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t d = 0; d < shape.size(); ++d) scales[i] = std::min(scales[i], maxima[d][index(i, d)]);
}

TEST(LowBitRank1, MaximaAndScalesMatchPlainLoops) {
  Generator g(2);
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{3, 5}, {7, 1}, {1, 9}, {2, 3, 4}, {300, 70}, {4, 3, 5, 7}, {2000, 33}}) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    std::vector<float> x = randn({n}, DType::f32, &g).to_vector<float>();
    x[0] = kNaN;
    x[static_cast<size_t>(n) / 2] = -kInf;
    std::vector<std::vector<float>> want_max;
    std::vector<float> want_scales;
    rank1_ref(x, shape, want_max, want_scales);
    std::vector<std::vector<float>> got_max(shape.size());
    std::vector<float*> ptrs;
    for (size_t d = 0; d < shape.size(); ++d) {
      got_max[d].assign(static_cast<size_t>(shape[d]), 0.0f);
      ptrs.push_back(got_max[d].data());
    }
    // Gathered as an update gathers them: ranges that cut rows, on two "threads", then merged.
    Rank1Maxima first(shape), second(shape);
    const int64_t cut1 = n / 3 + 1, cut2 = 2 * n / 3 + 1;
    first.add(0, cut1, x.data());
    second.add(cut1, cut2 - cut1, x.data() + cut1);
    first.add(cut2, n - cut2, x.data() + cut2);
    first.merge_into(ptrs.data());
    second.merge_into(ptrs.data());
    EXPECT_EQ(got_max, want_max);
    // Scales of every range, as the blocks of a state ask for them: [begin, begin + len).
    for (int64_t begin : {int64_t{0}, int64_t{1}, n / 3, n - 1}) {
      const int64_t len = std::min<int64_t>(n - begin, 300);
      std::vector<float> got(static_cast<size_t>(len));
      rank1_scales(shape, ptrs.data(), begin, len, got.data());
      EXPECT_EQ(got, std::vector<float>(want_scales.begin() + begin, want_scales.begin() + begin + len));
    }
  }
  EXPECT_THROW(Rank1Maxima(std::vector<int64_t>{2}), Error);
}

}  // namespace
}  // namespace octet::quant
