// The per-path row kernels behind quant/cpu/pbatch.h's pb_gemm (internal to quant/cpu/pbatch*.cpp):
// each computes rows [r0, r1) of the product for one batch chunk, the dispatcher threads over rows.
// Every path runs the same integer sums, so the same int64 results (uint64 arithmetic, which wraps
// where partial sums of one sign would pass 2^63; the total is exact).
//   detail::pb_rows_portable(args, 0, args.rows);
#pragma once

#include <cstdint>

namespace octet::quant::cpu::detail {

struct PbGemmArgs {
  const uint64_t* w;  // u64 [rows, w_planes, words]
  int64_t rows;
  int w_planes;
  int64_t words;      // a multiple of kPbWordAlign
  const uint64_t* x;  // u64 [batch, x_planes, words]
  int64_t batch;      // <= kPbMaxBatch
  int x_planes;
  int first_plane;  // weight planes below it are skipped (the 1-bit path: 1)
  int64_t* acc;     // [batch, rows]; the skipped planes' part is added by the caller
};

// nearbyint(clamp(v, -limit, limit)) for an integer limit < 2^51, ties to even: adding 1.5 * 2^52
// leaves no fraction bits, so the add rounds (in the default mode) and the subtract is exact. Equal to
// the definition's clamp(nearbyint(v)), with no libm call in the baseline build.
inline double pb_round_clamped(double v, double limit) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  v = v < -limit ? -limit : (v > limit ? limit : v);
  return (v + kMagic) - kMagic;
}

// int32(trunc(x * factor)) saturated to the int32 range (as CUDA's conversion; the reference's FIXED),
// for a finite x.
inline int32_t pb_fixed_code(float x, double factor) {
  double v = static_cast<double>(x) * factor;
  v = v < -2147483648.0 ? -2147483648.0 : (v > 2147483647.0 ? 2147483647.0 : v);
  return static_cast<int32_t>(v);  // the conversion truncates
}

void pb_rows_portable(const PbGemmArgs& a, int64_t r0, int64_t r1);
// The bit transpose of up to 64 codes: planes[j * stride] gets bit j of code[e] as its bit e, for
// j < bits (n < 64: the bits past n zero).
void pb_transpose_portable(const uint32_t* code, int n, int bits, uint64_t* planes, int64_t stride);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
void pb_rows_avx2(const PbGemmArgs& a, int64_t r0, int64_t r1);
void pb_rows_avx512(const PbGemmArgs& a, int64_t r0, int64_t r1);
void pb_transpose_avx512(const uint32_t* code, int n, int bits, uint64_t* planes, int64_t stride);
#endif

}  // namespace octet::quant::cpu::detail
