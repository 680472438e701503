// The per-thread arithmetic of the CUDA PrecisionBatching kernels (quant/cuda/pbatch.cu), OCTET_HD so
// that the kernels and the host emulation (tests/quant/test_pbatch_cuda_emulation.cpp) run the same
// code; the emulation drives them over every thread on the CPU and checks the planes, scales, sums
// and outputs bit for bit against the CPU kernels (quant/cpu/pbatch.h). What only a GPU can check is
// the launches, the shuffles and ballots, and the intrinsics.
//
// Quantizer: one thread block per batch row. Its threads take the row's max |x| (on the bit patterns,
// so a NaN lies above infinity, exact in any order), then pb_row_scale gives s_b and the factor
// (2^(k-1) - 1) / m of quant/pbatch.h; warp w' takes words w = w', w' + warps, ...: lane l codes the
// columns 64w + l and 64w + 32 + l (pb_column_codes), and for each plane j two __ballot_sync of bit j
// make word w of plane j (pb_plane_word), which lane j stores. Every word up to pb_words(cols) is
// written (zeros past cols).
// Product: L = pb_lanes_per_row(words) lanes (8, 16 or 32) of a warp per output row: lane l of row r
// loads the row's weight planes of words u = l, l + L, ... once and for each batch row b and
// activation plane j adds sign_j 2^j sum_p sign_p 2^p popcount(W_p[u] AND X_j[b][u]) into an int64
// (pb_lane_sums: integer, exact, so any order of the lanes' sums gives the CPU's value); an xor
// shuffle butterfly over the L lanes gives every lane the row's sums, and lane b writes output b
// (pb_output). Up to kPbMaxBatch batch rows per thread; blockIdx.y picks the chunk of the batch.
// The paper scheme's activations (pb_row_scale_fixed): the same kernel, each code int32(trunc(x 2^shift))
// saturated, of which the planes keep the low k bits (the wrap of the reference's kernel).
// 1-bit weights (as cpu::pb_gemm_1bit) whose plane 0 is all ones on the columns: it is not read; its
// part, sum_K xq[b, K], comes from a first kernel (a warp per batch row, pb_lane_code_sum), half the
// weight loads and popcounts of the product.
//   PbRowScale s = pb_row_scale(max_abs_bits, bits);
//   int64_t acc[kPbMaxBatch]; pb_lane_sums<5>(args, r, lane, L, acc);   // w4: five planes (w1: <2, 1>)
//   y[b * rows + r] = pb_output(acc_total[b], step, row_steps, scale[b], bias, r);
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/hostdevice.h"
#include "quant/pbatch.h"

namespace octet::quant::cuda::pb {

inline constexpr int kWarp = 32;
inline constexpr int kThreads = 256;
inline constexpr uint32_t kAbsMask = 0x7fffffffu, kInfBits = 0x7f800000u;
inline constexpr int kMaxWeightPlanes = kPbMaxWeightBits + 1;

// ---------------------------------------------------------------- activation quantizer

// One batch row's quantization: s_b (quant/pbatch.h), the factor x is multiplied by, the largest code.
struct PbRowScale {
  double scale;        // s_b: m / (2^(k-1) - 1); 0 for a zero row; NaN for a row with a NaN or an infinity
  double factor;       // (2^(k-1) - 1) / m; 0 when every code is 0 (zero or non-finite row)
  double qmax;         // 2^(k-1) - 1
  bool fixed = false;  // the paper scheme: xq = int32(trunc(x * factor)), saturated; its low k bits are planes
};

// |x| as its bit pattern: ordered like the magnitudes, NaNs above infinity.
OCTET_HD inline uint32_t pb_abs_bits(float x) { return std::bit_cast<uint32_t>(x) & kAbsMask; }

// The scale of a row whose max |x| has the bit pattern max_bits, for k = bits.
OCTET_HD inline PbRowScale pb_row_scale(uint32_t max_bits, int bits) {
  const double qmax = static_cast<double>((int64_t{1} << (bits - 1)) - 1);
  if (max_bits >= kInfBits) return {std::numeric_limits<double>::quiet_NaN(), 0.0, qmax};
  if (max_bits == 0) return {0.0, 0.0, qmax};
  const double m = static_cast<double>(std::bit_cast<float>(max_bits));
  return {m / qmax, qmax / m, qmax};
}

// The paper scheme's row: s_b = 2^-shift, factor 2^shift; NaN and factor 0 for a non-finite row.
OCTET_HD inline PbRowScale pb_row_scale_fixed(uint32_t max_bits, int shift) {
  if (max_bits >= kInfBits) return {std::numeric_limits<double>::quiet_NaN(), 0.0, 0.0, true};
  return {std::ldexp(1.0, -shift), std::ldexp(1.0, shift), 0.0, true};
}

// xq = clamp(nearbyint(double(x) * factor), -qmax, qmax) (ties to even); 0 when factor is 0. Fixed:
// int32(trunc(x * factor)) saturated (the planes take its low k bits: the reference's wrap).
OCTET_HD inline int32_t pb_code(float x, const PbRowScale& s) {
  if (s.factor == 0.0) return 0;
  if (s.fixed) {
    double f = static_cast<double>(x) * s.factor;
    f = f < -2147483648.0 ? -2147483648.0 : (f > 2147483647.0 ? 2147483647.0 : f);
    return static_cast<int32_t>(f);
  }
  double v = std::nearbyint(static_cast<double>(x) * s.factor);
  v = v < -s.qmax ? -s.qmax : (v > s.qmax ? s.qmax : v);
  return static_cast<int32_t>(v);
}

// Lane `lane`'s two codes of word w of a row: columns 64w + lane (lo) and 64w + 32 + lane (hi), 0
// past cols.
OCTET_HD inline void pb_column_codes(const float* xrow, int64_t cols, int64_t w, int lane, const PbRowScale& s,
                                     int32_t& lo, int32_t& hi) {
  const int64_t c = 64 * w + lane;
  lo = c < cols ? pb_code(xrow[c], s) : 0;
  hi = c + 32 < cols ? pb_code(xrow[c + 32], s) : 0;
}

// Bit j of a code, the predicate of plane j's ballot (two's complement: bit k-1 is the sign).
OCTET_HD inline bool pb_code_bit(int32_t q, int j) { return ((static_cast<uint32_t>(q) >> j) & 1u) != 0; }

// Word w of a plane from the ballots of its low and high 32 columns.
OCTET_HD inline uint64_t pb_plane_word(uint32_t lo_ballot, uint32_t hi_ballot) {
  return static_cast<uint64_t>(lo_ballot) | static_cast<uint64_t>(hi_ballot) << 32;
}

// ---------------------------------------------------------------- product

// Lanes per output row: as many of a warp's 32 as the row has words (words is a multiple of 8).
OCTET_HD inline int pb_lanes_per_row(int64_t words) { return words >= 32 ? 32 : (words >= 16 ? 16 : 8); }

struct PbGemmArgs {
  const uint64_t* w;  // [rows, w_planes, words]
  int64_t rows;
  int64_t words;
  const uint64_t* x;  // [batch, x_planes, words]: the launch's chunk of the batch
  int64_t batch;      // 1..kPbMaxBatch
  int x_planes;
};

OCTET_HD inline uint64_t pb_load(const uint64_t* p) {
#ifdef __CUDA_ARCH__
  return __ldg(reinterpret_cast<const unsigned long long*>(p));
#else
  return *p;
#endif
}

OCTET_HD inline int pb_popcount(uint64_t v) {
#ifdef __CUDA_ARCH__
  return __popcll(v);
#else
  return std::popcount(v);
#endif
}

// Row r's sums over the words u = lane, lane + lanes, ... into acc[b] (b < batch; the rest 0), W
// with P planes of which planes First.. are read (First = 1: 1-bit weights, whose plane 0 is all ones
// on the columns; its part is pb_lane_code_sums', added per batch row). Sums wrap modulo 2^64
// (unsigned), so the total over the lanes is exact whatever their order whenever the true sum fits
// (quant/pbatch.h bounds it below 2^63).
template <int P, int First = 0>
OCTET_HD void pb_lane_sums(const PbGemmArgs& a, int64_t r, int lane, int lanes, int64_t (&acc)[kPbMaxBatch]) {
  static_assert(P >= 2 && P <= kMaxWeightPlanes && First >= 0 && First < P, "2..9 planes, the top one read");
  uint64_t sum[kPbMaxBatch] = {};
  const uint64_t* wr = a.w + r * P * a.words;
  for (int64_t u = lane; u < a.words; u += lanes) {
    uint64_t wp[P];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int p = First; p < P; ++p) wp[p] = pb_load(wr + p * a.words + u);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int b = 0; b < static_cast<int>(kPbMaxBatch); ++b) {
      if (b >= a.batch) continue;
      const uint64_t* xb = a.x + static_cast<int64_t>(b) * a.x_planes * a.words + u;
      for (int j = 0; j < a.x_planes; ++j) {
        const uint64_t xv = pb_load(xb + j * a.words);
        int32_t t = 0;  // sum_p sign_p 2^p popcount: |t| < 64 * 2^P <= 2^15
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int p = First; p < P - 1; ++p) t += pb_popcount(wp[p] & xv) << p;
        t -= pb_popcount(wp[P - 1] & xv) << (P - 1);
        const uint64_t tj = static_cast<uint64_t>(static_cast<int64_t>(t)) << j;
        sum[b] = j == a.x_planes - 1 ? sum[b] - tj : sum[b] + tj;  // the top activation plane is negative
      }
    }
  }
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
  for (int b = 0; b < static_cast<int>(kPbMaxBatch); ++b) acc[b] = static_cast<int64_t>(sum[b]);
}

// The 1-bit weights' plane-0 part of batch row b's sums: sum_K xq[b, K] = sum_j sign_j 2^j
// popcount(X_j[b]) (X is zero past the columns), over the words u = lane, lane + lanes, ... of the
// row's planes xb [x_planes][words]; modulo 2^64 like pb_lane_sums. One warp per batch row.
OCTET_HD inline int64_t pb_lane_code_sum(const uint64_t* xb, int x_planes, int64_t words, int lane, int lanes) {
  uint64_t sum = 0;
  for (int j = 0; j < x_planes; ++j) {
    uint64_t c = 0;
    for (int64_t u = lane; u < words; u += lanes) c += static_cast<uint64_t>(pb_popcount(pb_load(xb + j * words + u)));
    sum = j == x_planes - 1 ? sum - (c << j) : sum + (c << j);
  }
  return static_cast<int64_t>(sum);
}

// The thread's row and lane within it, for a flat thread index t (blockIdx.x * blockDim.x + threadIdx.x).
struct PbThread {
  int64_t row;
  int lane;
};
OCTET_HD inline PbThread pb_thread(int64_t t, int lanes) { return {t / lanes, static_cast<int>(t % lanes)}; }

// Blocks along x for `rows` rows at `lanes` lanes per row (kThreads threads a block).
OCTET_HD inline int64_t pb_gemm_blocks(int64_t rows, int lanes) { return (rows * lanes + kThreads - 1) / kThreads; }

// A row's sum plus the plane-0 part of 1-bit weights (0 otherwise), modulo 2^64.
OCTET_HD inline int64_t pb_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

// y = float(double(acc) * (d * s_b)) + bias[r] (the add in float; none without a bias), d = row_steps[r]
// (the per-row step) or step.
OCTET_HD inline float pb_output(int64_t acc, double step, const double* row_steps, double scale_b, const float* bias,
                                int64_t r) {
  const double d = row_steps != nullptr ? row_steps[r] : step;
  const float y = static_cast<float>(static_cast<double>(acc) * (d * scale_b));
  return bias != nullptr ? y + bias[r] : y;
}

}  // namespace octet::quant::cuda::pb
