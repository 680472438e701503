// CPU kernels of the 4-bit codes (quant/lowbit.h): one loop each for encoding and decoding,
// compiled per ISA through cpu::simd_dispatch (the same comparisons and the same float multiply
// on every path, so the same codes and values), and the rank-1 maxima and scales.
#include "quant/lowbit.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/block_code.h"
#include "quant/cpu/blockwise.h"

namespace octet::quant {
namespace {

// The number of thresholds below v: nearest_code4 for non-NaN v (quant/maps.h). Fifteen compares
// of every lane, branch-free.
OCTET_SIMD_INLINE unsigned code4(const Thresholds4& t, float v) {
  unsigned c = 0;
  for (int j = 0; j < 15; ++j) c += v > t[j] ? 1u : 0u;
  return c;
}

template <bool kPerElement>
OCTET_SIMD_INLINE void encode_pairs(const float* x, int64_t pairs, const float* scale, float one_scale,
                                    const Thresholds4& t, uint8_t* packed) {
  for (int64_t i = 0; i < pairs; ++i) {
    const float s0 = kPerElement ? scale[2 * i] : one_scale, s1 = kPerElement ? scale[2 * i + 1] : one_scale;
    const unsigned hi = code4(t, normalized(x[2 * i], s0)), lo = code4(t, normalized(x[2 * i + 1], s1));
    packed[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
}

template <bool kPerElement>
OCTET_SIMD_INLINE void decode_pairs(const uint8_t* packed, int64_t pairs, const float* scale, float one_scale,
                                    const Map4& map, float* out) {
  for (int64_t i = 0; i < pairs; ++i) {
    const float s0 = kPerElement ? scale[2 * i] : one_scale, s1 = kPerElement ? scale[2 * i + 1] : one_scale;
    out[2 * i] = map[packed[i] >> 4] * s0;
    out[2 * i + 1] = map[packed[i] & 15u] * s1;
  }
}

// |x| when finite, else 0 (absmax_step's rule).
inline float finite_abs(float x) {
  const float a = std::fabs(x);
  return a < INFINITY ? a : 0.0f;
}

}  // namespace

void encode4(const float* x, int64_t n, const float* scale, float one_scale, QuantMap4 map, uint8_t* packed) {
  const Thresholds4 t = quant_thresholds4(map);
  const int64_t pairs = n / 2;
  if (scale != nullptr) {
    octet::cpu::simd_dispatch([=] { encode_pairs<true>(x, pairs, scale, one_scale, t, packed); });
  } else {
    octet::cpu::simd_dispatch([=] { encode_pairs<false>(x, pairs, scale, one_scale, t, packed); });
  }
  if (n % 2 != 0) {
    const float s = scale != nullptr ? scale[n - 1] : one_scale;
    packed[pairs] = static_cast<uint8_t>(code4(t, normalized(x[n - 1], s)) << 4);
  }
}

void decode4(const uint8_t* packed, int64_t n, const float* scale, float one_scale, QuantMap4 map, float* out) {
  const Map4 m = quant_map4(map);
  const int64_t pairs = n / 2;
  if (scale != nullptr) {
    octet::cpu::simd_dispatch([=] { decode_pairs<true>(packed, pairs, scale, one_scale, m, out); });
  } else {
    octet::cpu::simd_dispatch([=] { decode_pairs<false>(packed, pairs, scale, one_scale, m, out); });
  }
  if (n % 2 != 0) out[n - 1] = m[packed[pairs] >> 4] * (scale != nullptr ? scale[n - 1] : one_scale);
}

float absmax4(const float* x, int64_t n) { return cpu::block_absmax(cpu::active_isa(), x, n); }

void rank1_maxima(const float* x, std::span<const int64_t> shape, float* const* maxima) {
  const size_t dims = shape.size();
  OCTET_CHECK(dims >= 2, "rank1_maxima: a tensor of ", dims, " dims (rank-1 normalization needs >= 2)");
  const int64_t inner = shape[dims - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < dims; ++d) rows *= shape[d];
  for (size_t d = 0; d < dims; ++d) std::fill(maxima[d], maxima[d] + shape[d], 0.0f);
  std::mutex merge;
  // Each chunk of rows keeps its own maxima and merges them at the end: a max is exact, so the
  // result does not depend on the chunks.
  parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<std::vector<float>> local(dims);
    for (size_t d = 0; d < dims; ++d) local[d].assign(static_cast<size_t>(shape[d]), 0.0f);
    float* last = local[dims - 1].data();
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * inner;
      float row_max = 0.0f;
      for (int64_t j = 0; j < inner; ++j) {
        const float a = finite_abs(row[j]);
        last[j] = std::max(last[j], a);
        row_max = std::max(row_max, a);
      }
      int64_t rest = r;  // the row's index along each leading dim, last leading dim first
      for (size_t d = dims - 1; d-- > 0;) {
        const int64_t i = rest % shape[d];
        rest /= shape[d];
        local[d][static_cast<size_t>(i)] = std::max(local[d][static_cast<size_t>(i)], row_max);
      }
    }
    std::lock_guard<std::mutex> lock(merge);
    for (size_t d = 0; d < dims; ++d)
      for (int64_t i = 0; i < shape[d]; ++i) maxima[d][i] = std::max(maxima[d][i], local[d][static_cast<size_t>(i)]);
  });
}

void rank1_scales(std::span<const int64_t> shape, const float* const* maxima, int64_t begin, int64_t n, float* out) {
  const size_t dims = shape.size();
  OCTET_CHECK(dims >= 2, "rank1_scales: a tensor of ", dims, " dims (rank-1 normalization needs >= 2)");
  const int64_t inner = shape[dims - 1];
  const float* last = maxima[dims - 1];
  int64_t i = 0;
  while (i < n) {
    const int64_t flat = begin + i, row = flat / inner, j0 = flat % inner;
    float outer = INFINITY;  // the least of the row's maxima along the leading dims
    int64_t rest = row;
    for (size_t d = dims - 1; d-- > 0;) {
      outer = std::min(outer, maxima[d][rest % shape[d]]);
      rest /= shape[d];
    }
    const int64_t len = std::min(inner - j0, n - i);
    for (int64_t j = 0; j < len; ++j) out[i + j] = std::min(outer, last[j0 + j]);
    i += len;
  }
}

}  // namespace octet::quant
