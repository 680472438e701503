// CUDA block-wise quantization (definition in quant/blockwise.h), reached through
// quant::quantize_blockwise_into / dequantize_blockwise_into for tensors on a CUDA device, and the
// device copies of the maps that the fused 8-bit optimizer kernels (optim/cuda/) use as well.
// Pure C++ declarations: no CUDA headers here. Raw device pointers, on the current stream.
//   const DeviceTables* t = device_tables(QuantMap::dynamic_signed, x.device().index);
//   quantize_blocks(x.data<float>(), n, 2048, t, codes.data<uint8_t>(), absmax.data<float>());
#pragma once

#include <cstdint>

#include "quant/code_table.h"
#include "quant/maps.h"

namespace octet::quant::cuda {

// A map (256 ascending values) and its code table (quant/code_table.h: the same table the CPU
// kernels read), as they lie in device memory.
struct DeviceTables {
  float map[256];
  CodeTable codes;
};

// The tables of `map` on CUDA device `device`, uploaded on first use and kept for the lifetime of
// the process (17 KB per map and device).
const DeviceTables* device_tables(QuantMap map, int device);

// n elements in blocks of block_size (a power of two in [64, 4096]); absmax has one entry per block.
void quantize_blocks(const float* x, int64_t n, int64_t block_size, const DeviceTables* tables, uint8_t* codes,
                     float* absmax);
void dequantize_blocks(const uint8_t* codes, int64_t n, int64_t block_size, const float* absmax,
                       const DeviceTables* tables, float* out);

}  // namespace octet::quant::cuda
