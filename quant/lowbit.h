// 4-bit codes for optimizer state (Li et al., "Memory Efficient Optimizers with 4-bit States",
// NeurIPS 2023): values normalized by a scale and stored as the index of the nearest entry of a
// 16-value map (quant/maps.h, QuantMap4), two codes per byte. The same definition as the 8-bit
// codes of quant/blockwise.h:
//   v    = x / scale in float (IEEE division); NaN -> 0 (so 0 / 0 of an all-zero block, too);
//   code = nearest_code4(map, v) = the number of the map's thresholds below v.
// Packing: element 2i in the high nibble of byte i, element 2i + 1 in the low nibble (torchao's
// order); an odd count leaves the last low nibble 0. A run of elements must start at an even
// element of its tensor, so runs (blocks) share no byte.
// Scales come two ways:
//   block-wise -- one scale per block: its absmax (finite elements only, as absmax_step);
//   rank-1 -- for a tensor with >= 2 dims, the paper's normalization: for each dim d, max_d[i]
//     is the largest finite |x| over the elements with index i along d, and an element's scale is
//     the least of its maxima over the dims (for a matrix: min(row max, column max)). Costs
//     4 bytes per row and column instead of per block, and follows a matrix's row and column
//     structure, which second moments have.
// The kernels follow active_isa() (core/cpu/isa.h): a plain loop, or AVX2 / AVX-512 kernels that
// give the same codes and values; the scalar reference is nearest_code4.
//   uint8_t packed[64];
//   quant::encode4(x, 128, nullptr, absmax, QuantMap4::dynamic_signed, packed);
//   quant::decode4(packed, 128, nullptr, absmax, QuantMap4::dynamic_signed, back);
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "quant/maps.h"

namespace octet::quant {

inline int64_t packed4_bytes(int64_t n) { return (n + 1) / 2; }

// Codes of x[i] / s_i, where s_i = scale[i], or one_scale when scale is null.
void encode4(const float* x, int64_t n, const float* scale, float one_scale, QuantMap4 map, uint8_t* packed);
// out[i] = map[code_i] * s_i.
void decode4(const uint8_t* packed, int64_t n, const float* scale, float one_scale, QuantMap4 map, float* out);
// The largest finite |x[i]| (0 if none): a block's scale.
float absmax4(const float* x, int64_t n);

// ---- rank-1 normalization of a tensor of `shape` (>= 2 dims), flat and contiguous.

// maxima[d][i]: the largest finite |x| over the elements with index i along dim d, gathered range
// by range (an update's blocks, on its threads), then merged.
class Rank1Maxima {
 public:
  explicit Rank1Maxima(std::span<const int64_t> shape);  // all 0
  // Folds in x[0..n), the values of elements [begin, begin + n).
  void add(int64_t begin, int64_t n, const float* x);
  // maxima[d][i] = max(maxima[d][i], this one's).
  void merge_into(float* const* maxima) const;

 private:
  std::vector<int64_t> shape_;
  std::vector<std::vector<uint32_t>> bits_;  // the maxima's bits (non-negative floats order as them)
};
// out[i] = the scale of element begin + i: the least of maxima[d][its index along d] over d.
void rank1_scales(std::span<const int64_t> shape, const float* const* maxima, int64_t begin, int64_t n, float* out);

}  // namespace octet::quant
