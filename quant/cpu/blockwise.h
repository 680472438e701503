// CPU kernels of block-wise quantization (definition in quant/blockwise.h), with a run-time choice
// of instruction set (core/cpu/isa.h): the AVX2 / AVX-512 versions are compiled per function and
// picked from the CPU's features. Every path gives bit-identical codes and absmax; tests check
// each one against the _ref kernel.
//   cpu::set_active_isa(cpu::Isa::portable);   // e.g. to test or time the fallback
//   cpu::quantize_block(cpu::Isa::avx512, x, n, map, codes, &absmax);
//
// The fast search, portable and AVX2: the code table of quant/code_table.h, one lookup (a gather
// on AVX2) and one compare per element (AVX2 on Zen 1: 2.2 ns per element against 5.6 for the
// tree walk it replaced). AVX-512, and any map without a table on the other paths, walk a tree:
// the 255 decision thresholds of the map (quant/maps.h) in Eytzinger (breadth-first binary tree)
// order, node[k] for k in [1, 256), each element walking 8 levels, k = 2k + (v > node[k]), ending
// at k = 256 + code -- branch-free. AVX-512 keeps the whole tree in 16 registers and looks nodes up
// with permutes (it stays there: no AVX-512 machine was at hand to time the table against it).
// Dequantization is a table lookup: 8 scalar loads into a vector on AVX2 (0.45 ns per element on
// Zen 1, against 0.96 for the plain loop and 1.3 for vgatherdps); on AVX-512 the map sits in 16
// registers and codes are looked up with permutes (faster than vgatherdps there: 3.5 vs 2.7 G
// elements/s on Zen 5).
#pragma once

#include <cstdint>

#include "core/cpu/isa.h"
#include "quant/code_table.h"
#include "quant/maps.h"

namespace octet::quant::cpu {

// The process-wide ISA choice of core/cpu/isa.h, also under quant::cpu.
using octet::cpu::active_isa;
using octet::cpu::best_isa;
using octet::cpu::Isa;
using octet::cpu::isa_name;
using octet::cpu::isa_supported;
using octet::cpu::set_active_isa;

// Thresholds in Eytzinger order; node[0] unused.
struct alignas(64) SearchTree {
  float node[256];
};
SearchTree make_search_tree(const Thresholds& t);
// The cached tree of a built-in map when `map` is one of quant_map(...).data(), else `scratch`
// filled from the map.
const SearchTree& search_tree(const float* map, SearchTree& scratch);

// A block's absmax (max |x[i]| over finite x[i], 0 if none) with an explicit ISA.
float block_absmax(Isa isa, const float* x, int64_t n);
// One block with an explicit ISA (must be supported).
void quantize_block(Isa isa, const float* x, int64_t n, const float* map, uint8_t* codes, float* absmax);
void dequantize_block(Isa isa, const uint8_t* codes, int64_t n, float absmax, const float* map, float* out);

// Whole tensors of n elements in blocks of block_size, parallel over blocks, with active_isa().
void quantize_blocks(const float* x, int64_t n, int64_t block_size, const float* map, uint8_t* codes, float* absmax);
void dequantize_blocks(const uint8_t* codes, int64_t n, int64_t block_size, const float* absmax, const float* map,
                       float* out);

// ---- per-ISA pieces (quant/cpu/blockwise.cpp, quant/cpu/blockwise_x86.cpp)
namespace detail {
// max |x[i]| over finite x[i]; 0 if none.
float absmax_portable(const float* x, int64_t n);
// codes[i] = code of x[i] / absmax (NaN -> 0) found in `tree`.
void encode_portable(const float* x, int64_t n, float absmax, const SearchTree& tree, uint8_t* codes);
void decode_portable(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out);
// The same codes as encode_portable, from the map's code table.
void encode_table_portable(const float* x, int64_t n, float absmax, const CodeTable& table, uint8_t* codes);
#ifdef OCTET_CPU_X86
void encode_table_avx2(const float* x, int64_t n, float absmax, const CodeTable& table, uint8_t* codes);
void decode_avx2(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out);
float absmax_avx2(const float* x, int64_t n);
float absmax_avx512(const float* x, int64_t n);
void encode_avx512(const float* x, int64_t n, float absmax, const SearchTree& tree, uint8_t* codes);
void decode_avx512(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out);
#endif
}  // namespace detail

}  // namespace octet::quant::cpu
