// CPU INT8 quantization loops (quant/cpu/int8_quant.h). Built with -ffp-contract=off (see
// CMakeLists.txt): the AVX-512 / AVX2 clones must not fuse x * inv + magic into one rounding.
#include "quant/cpu/int8_quant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/cpu/lanes.h"
#include "core/cpu/philox.h"
#include "core/parallel.h"

namespace octet::quant::cpu {

namespace {

constexpr float kRoundMagic = 0x1.8p23f;  // 1.5 * 2^23: adding it leaves no fraction bits

// int8_clamped of quant/int8.h, written with selects: on a float, or on each lane of a float vector
// (GCC vector types; the quantizers' 8- and 4-lane loops below).
template <typename V>
OCTET_SIMD_INLINE V clamped(V x, float inv) {
  V y = x * inv;
  y = y == y ? y : V{};
  y = y < -kInt8Max ? -kInt8Max : y;
  return y > kInt8Max ? kInt8Max : y;
}
// nearbyint for |y| <= 2^22 in the default rounding mode (ties to even); a float or its lanes.
template <typename V>
OCTET_SIMD_INLINE V round_even(V y) {
  return (y + kRoundMagic) - kRoundMagic;
}
// floor for |v| < 2^31. The subtraction runs on every element (of 1 or 0): a `t - 1` inside the
// select may raise an FP exception only where taken, so GCC (-ftrapping-math) would not if-convert
// it without AVX-512's masks, and the AVX2 clone of the loops calling this ran one element at a time.
OCTET_SIMD_INLINE float floor_small(float v) {
  const float t = static_cast<float>(static_cast<int32_t>(v));
  return t - (t > v ? 1.0f : 0.0f);
}
OCTET_SIMD_INLINE int8_t to_code(float r) { return static_cast<int8_t>(static_cast<int32_t>(r)); }

// max |x| on the bit patterns: for non-negative floats the integer order is the float order, and
// every NaN pattern lies above infinity's, so a NaN wins the max and survives (no float max
// reduction, which the compiler would not vectorize).
uint32_t absmax_bits_run(const float* x, int64_t n) {
  return octet::cpu::simd_dispatch([=] {
    uint32_t m = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t b;
      std::memcpy(&b, x + i, 4);
      b &= 0x7fffffffu;
      m = m < b ? b : m;
    }
    return m;
  });
}

constexpr uint32_t kInfBits = 0x7f800000u;

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The quantizers' loops on 8 lanes, written with vector types: GCC did not vectorize the scalar
// forms for AVX2 ("control flow in loop"; AVX-512 it did, with masks), so the AVX2 clones ran one
// element at a time. Same operations in the same order as the element functions, so the same codes
// (tests Int8Quant.LoopsMatchElementFunctions, Int8Conv.EveryIsaGivesThePortableBits).
using V8f = float __attribute__((vector_size(32)));
using V8i = int32_t __attribute__((vector_size(32)));
using V8u = uint32_t __attribute__((vector_size(32)));
using V8b = int8_t __attribute__((vector_size(8)));

OCTET_SIMD_INLINE void store_codes8(V8f r, int8_t* q) {
  const V8b codes = __builtin_convertvector(__builtin_convertvector(r, V8i), V8b);
  std::memcpy(q, &codes, sizeof codes);
}

void nearest_run(const float* x, int64_t n, float inv, int8_t* q) {
  return octet::cpu::simd_dispatch([=] {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      V8f v;
      std::memcpy(&v, x + i, sizeof v);
      store_codes8(round_even(clamped(v, inv)), q + i);
    }
    for (; i < n; ++i) q[i] = to_code(round_even(clamped(x[i], inv)));
  });
}

OCTET_SIMD_INLINE void stochastic8(const float* x, const uint32_t* words, float inv, int8_t* q) {
  V8f v;
  V8u w;
  std::memcpy(&v, x, sizeof v);
  std::memcpy(&w, words, sizeof w);
  const V8f y = clamped(v, inv);
  const V8f u = __builtin_convertvector(__builtin_convertvector(w >> 8, V8i), V8f) * 0x1p-24f;  // uniform_float()
  const V8f sum = y + u;
  const V8f t = __builtin_convertvector(__builtin_convertvector(sum, V8i), V8f);  // floor_small()
  V8f r = t - (t > sum ? V8f{} + 1.0f : V8f{});
  store_codes8(r < kInt8Max ? r : kInt8Max, q);
}

void stochastic_from_words(const float* x, int64_t n, float inv, const uint32_t* words, int8_t* q) {
  return octet::cpu::simd_dispatch([=] {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) stochastic8(x + i, words + i, inv, q + i);
    for (; i < n; ++i) {
      const float r = floor_small(clamped(x[i], inv) + uniform_float(words[i]));
      q[i] = to_code(r < kInt8Max ? r : kInt8Max);
    }
  });
}

// Stochastic rounding of x[0, n), x[0] being element `first` of the tensor: words in batches.
void stochastic_run(const float* x, int64_t n, float inv, uint64_t seed, uint64_t first, int8_t* q) {
  constexpr int64_t kBatch = 1024;  // elements per batch of draws (4 KB of words, stays in L1)
  uint32_t words[kBatch + 8];
  for (int64_t i0 = 0; i0 < n; i0 += kBatch) {
    const int64_t len = std::min(kBatch, n - i0);
    const uint64_t lo = first + static_cast<uint64_t>(i0), hi = lo + static_cast<uint64_t>(len) - 1;
    const uint64_t ctr = lo >> 2;
    // sr_uniform's draws: word i & 3 of counter i >> 2.
    octet::cpu::philox_words(seed, ctr, static_cast<int64_t>((hi >> 2) - ctr + 1), words);
    stochastic_from_words(x + i0, len, inv, words + (lo & 3), q + i0);
  }
}

void quantize_run(const float* x, int64_t n, float inv, Int8Rounding rounding, uint64_t seed, uint64_t first,
                  int8_t* q) {
  if (rounding == Int8Rounding::nearest)
    nearest_run(x, n, inv, q);
  else
    stochastic_run(x, n, inv, seed, first, q);
}

// The cosine sums over eight lanes of doubles (core/cpu/lanes.h: element i goes to lane i % 8),
// combined in lane order, so every clone adds the same numbers in the same order. The float work
// is done on 4-lane halves, each widened once.
using octet::cpu::Lanes8;
using octet::cpu::V4f;
using V4b = int8_t __attribute__((vector_size(4)));

struct Lanes {
  Lanes8 gq, gg, qq;
  uint32_t max_bits = 0;  // of |g|, for the finiteness check

  OCTET_SIMD_INLINE void add(Lanes8 g, Lanes8 q) { gq += g * q, gg += g * g, qq += q * q; }
  CosineSums total() const {
    CosineSums s;
    for (int l = 0; l < 8; ++l) s.gq += gq[l], s.gg += gg[l], s.qq += qq[l];
    s.finite = max_bits < kInfBits;
    return s;
  }
};

OCTET_SIMD_INLINE V4f load4(const float* p) {
  V4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
OCTET_SIMD_INLINE V4f load4(const int8_t* p) {
  V4b v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, V4f);  // exact
}

// clamped() and round_even() on four lanes.
OCTET_SIMD_INLINE V4f nearest4(V4f g, float inv) { return round_even(clamped(g, inv)); }

// fn(g, q) on [0, n) in runs of 8 (q: the codes of p, T = int8_t or float), the last n % 8
// elements copied zero-padded (a zero adds nothing to any sum).
template <typename T, typename Fn>
OCTET_SIMD_INLINE void for_runs8(const float* g, const T* p, int64_t n, Fn fn) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) fn(g + i, p + i);
  if (i < n) {
    float gt[8] = {};
    T pt[8] = {};
    std::memcpy(gt, g + i, static_cast<size_t>(n - i) * sizeof(float));
    std::memcpy(pt, p + i, static_cast<size_t>(n - i) * sizeof(T));
    fn(gt, pt);
  }
}

CosineSums sums_run(const float* g, const int8_t* q, int64_t n) {
  return octet::cpu::simd_dispatch([=] {
    Lanes a;
    for_runs8(g, q, n, [&](const float* gp, const int8_t* qp) {
      a.add(Lanes8::load(gp), Lanes8::widen(load4(qp), load4(qp + 4)));
    });
    a.max_bits = absmax_bits_run(g, n);
    return a.total();
  });
}

// The same sums with q = round-to-nearest codes computed on the fly (DSGC's inner loop).
CosineSums nearest_sums_run(const float* g, int64_t n, float inv) {
  return octet::cpu::simd_dispatch([=] {
    Lanes a;
    for_runs8(g, g, n, [&](const float* gp, const float*) {
      const V4f lo = load4(gp), hi = load4(gp + 4);
      a.add(Lanes8::widen(lo, hi), Lanes8::widen(nearest4(lo, inv), nearest4(hi, inv)));
    });
    a.max_bits = absmax_bits_run(g, n);
    return a.total();
  });
}

// sum x[i] in double over eight lanes, combined in lane order.
OCTET_SIMD_INLINE double sum_run(const float* x, int64_t n) {
  Lanes8 acc;
  for_runs8(x, x, n, [&](const float* p, const float*) { acc += Lanes8::load(p); });
  double s = 0.0;
  for (int l = 0; l < 8; ++l) s += acc[l];
  return s;
}

// The plane pieces of source elements [begin, end) (planes of `len`): with `piece_sums`, each
// piece's float sum (in order); with `dst`, the codes q[0, end - begin) copied to plane (o, i)'s
// place [inner][outer][len]. One call per block: pieces can be 16 elements long.
void scatter_pieces(const float* src, const int8_t* q, int64_t begin, int64_t end, int64_t outer, int64_t inner,
                    int64_t len, int8_t* dst, double* piece_sums) {
  return octet::cpu::simd_dispatch([=] {
    int64_t piece = 0;
    for (int64_t j = begin; j < end; ++piece) {
      const int64_t plane = j / len, l0 = j % len, l1 = std::min(len, l0 + (end - j));
      if (piece_sums) piece_sums[piece] = sum_run(src + j, l1 - l0);
      if (dst) {
        const int64_t o = plane / inner, i = plane % inner;
        std::memcpy(dst + (i * outer + o) * len + l0, q + (j - begin), static_cast<size_t>(l1 - l0));
      }
      j += l1 - l0;
    }
  });
}

void dequantize_run(const int8_t* q, int64_t n, float scale, float* out) {
  return octet::cpu::simd_dispatch([=] {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
  });
}

int64_t num_blocks(int64_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

// fn(block, begin, end) for the fixed blocks of [0, n), in parallel.
template <typename Fn>
void for_blocks(int64_t n, Fn fn) {
  parallel_for(0, num_blocks(n), 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) fn(b, b * kQuantBlock, std::min(n, (b + 1) * kQuantBlock));
  });
}

}  // namespace

float absmax(const float* x, int64_t n) {
  std::vector<uint32_t> block_max(static_cast<size_t>(num_blocks(n)), 0);
  for_blocks(n, [&](int64_t b, int64_t begin, int64_t end) { block_max[b] = absmax_bits_run(x + begin, end - begin); });
  uint32_t m = 0;
  for (uint32_t b : block_max) m = std::max(m, b);
  return from_bits(m);  // a NaN pattern stays a NaN
}

void quantize(const float* x, int64_t n, float inv, Int8Rounding rounding, uint64_t seed, uint64_t first,
              int8_t* codes) {
  for_blocks(n, [&](int64_t, int64_t begin, int64_t end) {
    quantize_run(x + begin, end - begin, inv, rounding, seed, first + static_cast<uint64_t>(begin), codes + begin);
  });
}

void dequantize(const int8_t* codes, int64_t n, float scale, float* out) {
  for_blocks(
      n, [&](int64_t, int64_t begin, int64_t end) { dequantize_run(codes + begin, end - begin, scale, out + begin); });
}

CosineSums cosine_sums_nearest(const float* g, int64_t n, float inv) {
  std::vector<CosineSums> part(static_cast<size_t>(num_blocks(n)));
  for_blocks(n,
             [&](int64_t b, int64_t begin, int64_t end) { part[b] = nearest_sums_run(g + begin, end - begin, inv); });
  CosineSums s;
  for (const CosineSums& p : part) s += p;
  return s;
}

void quantize_transposed(const float* src, int64_t outer, int64_t inner, int64_t len, float inv, Int8Rounding rounding,
                         uint64_t seed, int8_t* dst, CosineSums* sums, double* inner_sums) {
  // Fixed blocks of the flat source (so the sums do not depend on the threads), quantized in one
  // run each and scattered plane piece by plane piece: planes can be as short as 16 elements (4x4
  // feature maps), too short to be work items of their own.
  const int64_t n = outer * inner * len, blocks = num_blocks(n);
  const bool in_place = outer == 1 || inner == 1;  // the transposition is the identity
  if (len == 1 && !in_place) {
    // Planes of one element (a Linear's rows: [N, K] -> [K, N]): a plain transposition of each
    // block's codes, and each inner index's sum over outer in order (what the pieces below add).
    std::vector<CosineSums> part1(sums ? static_cast<size_t>(blocks) : 0);
    parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      std::vector<int8_t> q(static_cast<size_t>(kQuantBlock));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t begin = b * kQuantBlock, end = std::min(n, begin + kQuantBlock);
        quantize_run(src + begin, end - begin, inv, rounding, seed, static_cast<uint64_t>(begin), q.data());
        if (sums) part1[b] = sums_run(src + begin, q.data(), end - begin);
        // Column by column (inner index i), the block's rows o in order: the writes run along dst's
        // rows, the reads stride through the block's codes (in L1). Column i holds the rows o with
        // begin <= o * inner + i < end. The sizes are locals: dst's int8 stores may alias anything,
        // so captured ones were reloaded at every element.
        const int64_t in = inner, rows = outer, o0 = begin / in, o1 = (end - 1) / in;
        const int8_t* const codes = q.data();
        for (int64_t i = 0; i < in; ++i) {
          if (end - 1 - i < 0) break;  // no row of this block reaches column i or beyond
          const int64_t lo = std::max(o0, (begin - i + in - 1) / in), hi = std::min(o1, (end - 1 - i) / in);
          const int8_t* from = codes + (lo * in + i - begin);
          int8_t* to = dst + i * rows;
          for (int64_t o = lo; o <= hi; ++o, from += in) to[o] = *from;
        }
      }
    });
    if (sums) {
      *sums = CosineSums();
      for (const CosineSums& p : part1) *sums += p;
    }
    if (inner_sums) {
      std::fill(inner_sums, inner_sums + inner, 0.0);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) inner_sums[i] += static_cast<double>(src[o * inner + i]);
    }
    return;
  }
  std::vector<CosineSums> part(sums ? static_cast<size_t>(blocks) : 0);
  // A block [b*B, (b+1)*B) meets planes first_plane(b) .. its last one; their partial sums.
  auto first_plane = [&](int64_t b) { return b * kQuantBlock / len; };
  auto planes_in = [&](int64_t b) { return (std::min(n, (b + 1) * kQuantBlock) - 1) / len - first_plane(b) + 1; };
  std::vector<int64_t> piece_start(inner_sums ? static_cast<size_t>(blocks + 1) : 0, 0);
  for (int64_t b = 0; inner_sums && b < blocks; ++b) piece_start[b + 1] = piece_start[b] + planes_in(b);
  std::vector<double> pieces(inner_sums ? static_cast<size_t>(piece_start[blocks]) : 0);
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<int8_t> tmp(in_place ? 0 : static_cast<size_t>(kQuantBlock));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kQuantBlock, end = std::min(n, begin + kQuantBlock);
      int8_t* q = in_place ? dst + begin : tmp.data();
      quantize_run(src + begin, end - begin, inv, rounding, seed, static_cast<uint64_t>(begin), q);
      if (sums) part[b] = sums_run(src + begin, q, end - begin);
      if (inner_sums || !in_place)
        scatter_pieces(src, q, begin, end, outer, inner, len, in_place ? nullptr : dst,
                       inner_sums ? pieces.data() + piece_start[b] : nullptr);
    }
  });
  if (sums) {
    *sums = CosineSums();
    for (const CosineSums& p : part) *sums += p;
  }
  if (inner_sums) {
    std::vector<double> plane_sums(static_cast<size_t>(outer * inner), 0.0);
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t k = 0; k < planes_in(b); ++k) plane_sums[first_plane(b) + k] += pieces[piece_start[b] + k];
    for (int64_t i = 0; i < inner; ++i) {
      inner_sums[i] = 0.0;
      for (int64_t o = 0; o < outer; ++o) inner_sums[i] += plane_sums[o * inner + i];
    }
  }
}

}  // namespace octet::quant::cpu
