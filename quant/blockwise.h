// Block-wise quantization (Dettmers et al., section 2.1): a tensor is read as a flat sequence of
// n elements cut into blocks of block_size; each block is divided by its absmax and every
// normalized value stored as the 8-bit index of the nearest entry of a quantization map
// (quant/maps.h). Dequantization is map[code] * absmax. An outlier only coarsens its own block.
//   BlockwiseQuantized q = quantize_blockwise(m, QuantMap::dynamic_signed);  // 1 byte + 4/2048
//   Tensor back = dequantize_blockwise(q);                                   // m's shape, f32
//   quantize_block(x, n, quant_map(QuantMap::dynamic_unsigned).data(), codes, &absmax);
//
// Definition, shared by every implementation (the scalar _ref kernels, the portable, AVX2 and
// AVX-512 CPU paths, and the CUDA kernels), which must give bit-identical codes and absmax:
//   absmax = max |x| over the block's FINITE elements (0 when there are none); a partial last
//            block covers only its valid elements.
//   v      = x / absmax in float (IEEE division, not a reciprocal); NaN -> 0.
//   code   = nearest_code(map, v): the nearest map entry, the lower one on a tie.
// Consequences: a NaN element stores the code of 0 (dequantizes to 0); +-inf saturate to the map's
// ends (+absmax and, for dynamic_signed, which has no -1, -0.99296875 absmax); a non-finite element never
// changes the other elements' codes. An all-zero block has absmax 0 (0/0 is NaN -> the code of 0)
// and dequantizes to exactly 0, as does anything in a block whose absmax is 0.
//
// Device: the tensor-level functions run on the device of their tensors (CPU, or CUDA in builds
// with it: quant/cuda/blockwise.h, one thread block per quantization block, the same threshold
// code table as the CPU, so the same codes and absmax); the raw block kernels below are CPU-only.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "quant/maps.h"

namespace octet::quant {

inline constexpr int64_t kDefaultBlockSize = 2048;
inline constexpr int64_t kMinBlockSize = 64;
inline constexpr int64_t kMaxBlockSize = 4096;

// The quantized form of a tensor with `shape`: codes u8 [n] and absmax f32 [num_blocks(n, bs)],
// both contiguous, on the device of the source tensor.
struct BlockwiseQuantized {
  Tensor codes;
  Tensor absmax;
  int64_t block_size = kDefaultBlockSize;
  QuantMap map = QuantMap::dynamic_signed;
  Shape shape;

  int64_t numel() const { return shape_numel(shape); }
};

// ceil(n / block_size)
inline int64_t num_blocks(int64_t n, int64_t block_size) { return (n + block_size - 1) / block_size; }

// Throws octet::Error unless block_size is a power of two in [64, 4096].
void check_block_size(int64_t block_size, const char* op);

// A quantized all-zero tensor of `shape` (absmax 0, codes of 0): the initial optimizer state.
BlockwiseQuantized blockwise_zeros(const Shape& shape, QuantMap map, int64_t block_size = kDefaultBlockSize,
                                   Device device = Device::cpu());

// x: f32, contiguous, any shape.
BlockwiseQuantized quantize_blockwise(const Tensor& x, QuantMap map, int64_t block_size = kDefaultBlockSize);
// Back to f32 with q.shape.
Tensor dequantize_blockwise(const BlockwiseQuantized& q);

// Preallocated variants. quantize_blockwise_into uses q.map and q.block_size, writes q.codes and
// q.absmax (which must already have the sizes above, contiguous, u8 / f32, on x's device) and sets
// q.shape = x.shape(). dequantize_blockwise_into writes into `out` (f32, contiguous, q.numel()
// elements, any shape).
void quantize_blockwise_into(const Tensor& x, BlockwiseQuantized& q);
void dequantize_blockwise_into(const BlockwiseQuantized& q, const Tensor& out);

// ---- raw CPU block kernels (one block, one thread), for the optimizer's per-block state updates.
// `map` points at 256 ascending floats, usually quant_map(...).data() (whose thresholds are
// cached; any other map has its thresholds rebuilt on each call). n >= 0 elements form ONE block.
// The fast versions pick the best instruction set of this CPU (quant/cpu/blockwise.h).
void quantize_block(const float* x, int64_t n, const float* map, uint8_t* codes, float* absmax);
void dequantize_block(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out);
// The scalar reference: the definition above, written plainly (a 256-entry scan per element).
void quantize_block_ref(const float* x, int64_t n, const float* map, uint8_t* codes, float* absmax);
void dequantize_block_ref(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out);

}  // namespace octet::quant
