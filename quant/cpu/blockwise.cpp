// CPU block-wise quantization: ISA selection, the portable kernels and the parallel block loops.
// The AVX2 / AVX-512 kernels live in blockwise_x86.cpp.
#include "quant/cpu/blockwise.h"

#include <algorithm>
#include <array>
#include <iterator>

#include "core/error.h"
#include "core/parallel.h"
#include "quant/block_code.h"
#include "quant/blockwise.h"

namespace octet::quant::cpu {

// ---- search trees

SearchTree make_search_tree(const Thresholds& t) {
  SearchTree tree{};
  // Level L (1..8) holds nodes [2^(L-1), 2^L); node j of it splits the codes in steps of
  // 2^(9-L) at threshold index j * 2^(9-L) + 2^(8-L) - 1.
  for (int level = 1; level <= 8; ++level) {
    int first = 1 << (level - 1), span = 1 << (9 - level);
    for (int j = 0; j < first; ++j) tree.node[first + j] = t[j * span + span / 2 - 1];
  }
  return tree;
}

const SearchTree& search_tree(const float* map, SearchTree& scratch) {
  static const auto trees = [] {
    std::array<SearchTree, std::size(kAllQuantMaps)> t{};
    for (QuantMap m : kAllQuantMaps) t[static_cast<size_t>(m)] = make_search_tree(quant_thresholds(m));
    return t;
  }();
  if (const QuantMap* m = builtin_map(map)) return trees[static_cast<size_t>(*m)];
  scratch = make_search_tree(compute_thresholds(map));
  return scratch;
}

// ---- portable kernels

namespace detail {

float absmax_portable(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = absmax_step(m, x[i]);
  return m;
}

void encode_portable(const float* x, int64_t n, float absmax, const SearchTree& tree, uint8_t* codes) {
  int64_t i = 0;
  // Four walks interleaved: independent chains of dependent loads overlap far better.
  for (; i + 4 <= n; i += 4) {
    float v0 = normalized(x[i], absmax), v1 = normalized(x[i + 1], absmax);
    float v2 = normalized(x[i + 2], absmax), v3 = normalized(x[i + 3], absmax);
    unsigned k0 = 1, k1 = 1, k2 = 1, k3 = 1;
    for (int level = 0; level < 8; ++level) {
      k0 = 2 * k0 + (v0 > tree.node[k0] ? 1u : 0u);
      k1 = 2 * k1 + (v1 > tree.node[k1] ? 1u : 0u);
      k2 = 2 * k2 + (v2 > tree.node[k2] ? 1u : 0u);
      k3 = 2 * k3 + (v3 > tree.node[k3] ? 1u : 0u);
    }
    codes[i] = static_cast<uint8_t>(k0 - 256);
    codes[i + 1] = static_cast<uint8_t>(k1 - 256);
    codes[i + 2] = static_cast<uint8_t>(k2 - 256);
    codes[i + 3] = static_cast<uint8_t>(k3 - 256);
  }
  for (; i < n; ++i) codes[i] = static_cast<uint8_t>(tree_code(tree.node, normalized(x[i], absmax)));
}

void encode_table_portable(const float* x, int64_t n, float absmax, const CodeTable& table, uint8_t* codes) {
  const CodeTableKeys keys = keys_of(table);
  for (int64_t i = 0; i < n; ++i) codes[i] = table_code(keys, normalized(x[i], absmax));
}

void decode_portable(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = decode(map, codes[i], absmax);
}

}  // namespace detail

// ---- dispatch

float block_absmax(Isa isa, const float* x, int64_t n) {
#ifdef OCTET_CPU_X86
  if (isa == Isa::avx512) return detail::absmax_avx512(x, n);
  if (isa == Isa::avx2) return detail::absmax_avx2(x, n);
#endif
  return detail::absmax_portable(x, n);
}

namespace {

// The map's code table where it has one (portable, AVX2), else the tree (always on AVX-512, whose
// whole tree sits in registers).
void encode_isa(Isa isa, const float* x, int64_t n, float absmax, const CodeTable* table, const SearchTree& tree,
                uint8_t* codes) {
#ifdef OCTET_CPU_X86
  if (isa == Isa::avx512) return detail::encode_avx512(x, n, absmax, tree, codes);
  if (isa == Isa::avx2 && table != nullptr) return detail::encode_table_avx2(x, n, absmax, *table, codes);
#endif
  if (table != nullptr) return detail::encode_table_portable(x, n, absmax, *table, codes);
  detail::encode_portable(x, n, absmax, tree, codes);
}

void decode_isa(Isa isa, const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
#ifdef OCTET_CPU_X86
  if (isa == Isa::avx512) return detail::decode_avx512(codes, n, absmax, map, out);
  if (isa == Isa::avx2) return detail::decode_avx2(codes, n, absmax, map, out);
#endif
  detail::decode_portable(codes, n, absmax, map, out);
}

void check_isa(Isa isa, const char* op) {
  OCTET_CHECK(isa_supported(isa), op, ": ISA ", isa_name(isa), " is not supported by this CPU or build");
}

}  // namespace

void quantize_block(Isa isa, const float* x, int64_t n, const float* map, uint8_t* codes, float* absmax) {
  check_isa(isa, "quant::cpu::quantize_block");
  const CodeTable* table = code_table(map);
  SearchTree scratch;
  const SearchTree& tree = search_tree(map, scratch);
  float a = block_absmax(isa, x, n);
  *absmax = a;
  encode_isa(isa, x, n, a, table, tree, codes);
}

void dequantize_block(Isa isa, const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  check_isa(isa, "quant::cpu::dequantize_block");
  decode_isa(isa, codes, n, absmax, map, out);
}

namespace {
// Blocks per parallel chunk: enough work (~64K elements) to be worth a thread.
int64_t block_grain(int64_t block_size) { return std::max<int64_t>(1, (int64_t{1} << 16) / block_size); }
}  // namespace

void quantize_blocks(const float* x, int64_t n, int64_t block_size, const float* map, uint8_t* codes, float* absmax) {
  Isa isa = active_isa();
  const CodeTable* table = code_table(map);
  SearchTree scratch;
  const SearchTree& tree = search_tree(map, scratch);
  parallel_for(0, (n + block_size - 1) / block_size, block_grain(block_size), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t begin = b * block_size, len = std::min(block_size, n - begin);
      float a = block_absmax(isa, x + begin, len);
      absmax[b] = a;
      encode_isa(isa, x + begin, len, a, table, tree, codes + begin);
    }
  });
}

void dequantize_blocks(const uint8_t* codes, int64_t n, int64_t block_size, const float* absmax, const float* map,
                       float* out) {
  const Isa isa = active_isa();
  parallel_for(0, (n + block_size - 1) / block_size, block_grain(block_size), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t begin = b * block_size, len = std::min(block_size, n - begin);
      decode_isa(isa, codes + begin, len, absmax[b], map, out + begin);
    }
  });
}

}  // namespace octet::quant::cpu

namespace octet::quant {

// The raw CPU block kernels of quant/blockwise.h, at this CPU's best instruction set.
void quantize_block(const float* x, int64_t n, const float* map, uint8_t* codes, float* absmax) {
  cpu::quantize_block(cpu::active_isa(), x, n, map, codes, absmax);
}

void dequantize_block(const uint8_t* codes, int64_t n, float absmax, const float* map, float* out) {
  cpu::dequantize_block(cpu::active_isa(), codes, n, absmax, map, out);
}

}  // namespace octet::quant
