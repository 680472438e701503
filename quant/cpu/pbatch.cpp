// CPU PrecisionBatching (quant/cpu/pbatch.h): the activation quantizer, the portable product, the
// path choice and the threading over rows. The AVX2 / AVX-512 row kernels live in pbatch_x86.cpp.
#include "quant/cpu/pbatch.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/cpu/pbatch_kernels.h"
#include "quant/pbatch.h"

namespace octet::quant::cpu {

namespace {

PbKernel best_kernel() {
  if (pb_kernel_supported(PbKernel::avx512_vpopcnt)) return PbKernel::avx512_vpopcnt;
  if (pb_kernel_supported(PbKernel::avx2)) return PbKernel::avx2;
  return PbKernel::portable;
}

// The sign of the plane-pair (p, j) term: the top plane of each operand counts negative.
bool negative_term(int p, int w_planes, int j, int x_planes) { return (p == w_planes - 1) != (j == x_planes - 1); }

}  // namespace

bool pb_kernel_supported(PbKernel k) {
  switch (k) {
    case PbKernel::portable:
      return true;
#ifdef OCTET_CPU_X86
    case PbKernel::avx2:
      return octet::cpu::isa_supported(octet::cpu::Isa::avx2);
    case PbKernel::avx512_vpopcnt:
      return octet::cpu::isa_supported(octet::cpu::Isa::avx512) && __builtin_cpu_supports("avx512vpopcntdq");
#endif
    default:
      return false;
  }
}

Selector<PbKernel>& pb_kernel_selector() {
  static Selector<PbKernel> selector{
      "PrecisionBatching kernel",
      "OCTET_PB_KERNEL",
      {{PbKernel::portable, "portable"}, {PbKernel::avx2, "avx2"}, {PbKernel::avx512_vpopcnt, "avx512_vpopcnt"}},
      pb_kernel_supported,
      best_kernel};
  return selector;
}

std::string_view pb_kernel_name(PbKernel k) { return pb_kernel_selector().name(k); }
PbKernel pb_kernel() { return pb_kernel_selector().active(); }
PbKernel set_pb_kernel(PbKernel k) { return pb_kernel_selector().set(k); }

void detail::pb_transpose_portable(const uint32_t* code, int n, int bits, uint64_t* planes, int64_t stride) {
  for (int j = 0; j < bits; ++j) {
    uint64_t word = 0;
    for (int e = 0; e < n; ++e) word |= static_cast<uint64_t>((code[e] >> j) & 1u) << e;
    planes[j * stride] = word;
  }
}

namespace {

// x [batch, cols] into bit planes, row by row: code_row(xb, code) writes a row's codes and returns
// its scale and whether it wrote codes (false: a non-finite or all-zero row, whose planes stay 0).
// A thread per batch row only for wide rows: a small layer's quantization is a few microseconds.
template <typename CodeRow>
void quantize_rows(const float* x, int64_t batch, int64_t cols, int bits, uint64_t* planes, double* scale,
                   CodeRow code_row) {
  const int64_t words = pb_words(cols);
  auto transpose = detail::pb_transpose_portable;
#ifdef OCTET_CPU_X86
  if (pb_kernel() == PbKernel::avx512_vpopcnt) transpose = detail::pb_transpose_avx512;
#endif
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, cols));
  parallel_for(0, batch, grain, [&](int64_t b0, int64_t b1) {
    std::vector<uint32_t> code(static_cast<size_t>(cols));
    for (int64_t b = b0; b < b1; ++b) {
      uint64_t* pb = planes + b * bits * words;
      std::fill(pb, pb + bits * words, uint64_t{0});
      const std::pair<double, bool> row = code_row(x + b * cols, code.data());
      scale[b] = row.first;
      if (!row.second) continue;
      for (int64_t w0 = 0; w0 < cols; w0 += 64)
        transpose(code.data() + w0, static_cast<int>(std::min<int64_t>(64, cols - w0)), bits, pb + w0 / 64, words);
    }
  });
}

// Whether every value of a row is finite; the compiler vectorizes the loop for the active ISA.
bool row_finite(const float* xb, int64_t cols) {
  return octet::cpu::simd_dispatch([=] {
    bool ok = true;
    for (int64_t i = 0; i < cols; ++i) ok = ok & (std::fabs(xb[i]) <= std::numeric_limits<float>::max());
    return ok;
  });
}

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

}  // namespace

void pb_quantize(const float* x, int64_t batch, int64_t cols, int bits, uint64_t* planes, double* scale) {
  OCTET_CHECK(bits >= kPbMinActivationBits && bits <= kPbMaxActivationBits, "pb_quantize: expected bits in [",
              kPbMinActivationBits, ", ", kPbMaxActivationBits, "], got ", bits);
  OCTET_CHECK(batch >= 0 && cols >= 0 && cols < kPbMaxCols, "pb_quantize: bad shape [", batch, ", ", cols, "]");
  const double limit = static_cast<double>((uint64_t{1} << (bits - 1)) - 1);
  quantize_rows(x, batch, cols, bits, planes, scale, [=](const float* xb, uint32_t* cp) {
    // max|x| and finiteness in one pass.
    const auto [m, finite] = octet::cpu::simd_dispatch([=] {
      float mx = 0.0f;
      bool ok = true;
      for (int64_t i = 0; i < cols; ++i) {
        const float a = std::fabs(xb[i]);
        ok = ok & (a <= std::numeric_limits<float>::max());
        mx = a > mx ? a : mx;
      }
      return std::pair<float, bool>(mx, ok);
    });
    if (!finite) return std::pair<double, bool>(kNan, false);
    if (m == 0.0f) return std::pair<double, bool>(0.0, false);
    const double inv = limit / static_cast<double>(m);
    octet::cpu::simd_dispatch([=] {
      for (int64_t i = 0; i < cols; ++i)
        cp[i] = static_cast<uint32_t>(
            static_cast<int32_t>(detail::pb_round_clamped(static_cast<double>(xb[i]) * inv, limit)));
    });
    return std::pair<double, bool>(static_cast<double>(m) / limit, true);
  });
}

void pb_quantize_fixed(const float* x, int64_t batch, int64_t cols, int bits, int shift, uint64_t* planes,
                       double* scale) {
  OCTET_CHECK(bits >= kPbMinActivationBits && bits <= kPbMaxActivationBits, "pb_quantize_fixed: expected bits in [",
              kPbMinActivationBits, ", ", kPbMaxActivationBits, "], got ", bits);
  OCTET_CHECK(shift >= 0 && shift <= kPbMaxActShift, "pb_quantize_fixed: expected a shift in [0, ", kPbMaxActShift,
              "], got ", shift);
  OCTET_CHECK(batch >= 0 && cols >= 0 && cols < kPbMaxCols, "pb_quantize_fixed: bad shape [", batch, ", ", cols, "]");
  const double factor = std::ldexp(1.0, shift), inv = std::ldexp(1.0, -shift);
  quantize_rows(x, batch, cols, bits, planes, scale, [=](const float* xb, uint32_t* cp) {
    if (!row_finite(xb, cols)) return std::pair<double, bool>(kNan, false);
    // Only the low `bits` bits reach the planes: the wrap of the reference's kernel.
    octet::cpu::simd_dispatch([=] {
      for (int64_t i = 0; i < cols; ++i) cp[i] = static_cast<uint32_t>(detail::pb_fixed_code(xb[i], factor));
    });
    return std::pair<double, bool>(inv, true);
  });
}

void detail::pb_rows_portable(const PbGemmArgs& a, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t b = 0; b < a.batch; ++b) {
      uint64_t total = 0;
      for (int p = a.first_plane; p < a.w_planes; ++p) {
        const uint64_t* wp = a.w + (r * a.w_planes + p) * a.words;
        for (int j = 0; j < a.x_planes; ++j) {
          const uint64_t* xj = a.x + (b * a.x_planes + j) * a.words;
          uint64_t c = 0;
          for (int64_t i = 0; i < a.words; ++i) c += static_cast<uint64_t>(std::popcount(wp[i] & xj[i]));
          const uint64_t t = c << (p + j);
          total = negative_term(p, a.w_planes, j, a.x_planes) ? total - t : total + t;
        }
      }
      a.acc[b * a.rows + r] = static_cast<int64_t>(total);
    }
  }
}

namespace {

void check_gemm(int64_t rows, int w_planes, int64_t words, int64_t batch, int x_planes, const char* op) {
  OCTET_CHECK(rows >= 0 && words >= 0 && words % kPbWordAlign == 0, op, ": bad sizes rows ", rows, ", words ", words);
  OCTET_CHECK(w_planes >= 2 && w_planes <= kPbMaxWeightBits + 1, op, ": expected 2..", kPbMaxWeightBits + 1,
              " weight planes, got ", w_planes);
  OCTET_CHECK(x_planes >= kPbMinActivationBits && x_planes <= kPbMaxActivationBits, op, ": expected ",
              kPbMinActivationBits, "..", kPbMaxActivationBits, " activation planes, got ", x_planes);
  OCTET_CHECK(batch >= 0 && batch <= kPbMaxBatch, op, ": expected a batch of at most ", kPbMaxBatch, ", got ", batch);
}

void run_rows(PbKernel k, const detail::PbGemmArgs& a) {
  if (a.rows == 0 || a.batch == 0) return;
  void (*fn)(const detail::PbGemmArgs&, int64_t, int64_t) = detail::pb_rows_portable;
#ifdef OCTET_CPU_X86
  if (k == PbKernel::avx2) fn = detail::pb_rows_avx2;
  if (k == PbKernel::avx512_vpopcnt) fn = detail::pb_rows_avx512;
#endif
  // At least ~64K plane words per thread chunk, so small layers stay on one thread.
  const int64_t per_row = std::max<int64_t>(1, (a.w_planes - a.first_plane) * a.x_planes * a.batch * a.words);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / per_row);
  parallel_for(0, a.rows, grain, [&](int64_t r0, int64_t r1) { fn(a, r0, r1); });
}

}  // namespace

void pb_gemm(PbKernel k, const uint64_t* w, int64_t rows, int w_planes, int64_t words, const uint64_t* x, int64_t batch,
             int x_planes, int64_t* acc) {
  check_gemm(rows, w_planes, words, batch, x_planes, "pb_gemm");
  OCTET_CHECK(pb_kernel_supported(k), "pb_gemm: path ", pb_kernel_name(k), " is not supported by this CPU or build");
  run_rows(k, {w, rows, w_planes, words, x, batch, x_planes, 0, acc});
}

void pb_gemm(const uint64_t* w, int64_t rows, int w_planes, int64_t words, const uint64_t* x, int64_t batch,
             int x_planes, int64_t* acc) {
  pb_gemm(pb_kernel(), w, rows, w_planes, words, x, batch, x_planes, acc);
}

void pb_gemm_1bit(PbKernel k, const uint64_t* w, int64_t rows, int64_t words, const uint64_t* x, int64_t batch,
                  int x_planes, int64_t* acc) {
  check_gemm(rows, 2, words, batch, x_planes, "pb_gemm_1bit");
  OCTET_CHECK(pb_kernel_supported(k), "pb_gemm_1bit: path ", pb_kernel_name(k),
              " is not supported by this CPU or build");
  run_rows(k, {w, rows, 2, words, x, batch, x_planes, 1, acc});
  // Plane 0 (scale +1) is all ones on the valid columns and X is zero past them, so its part of
  // every row is sum_j sign_j 2^j popcount(X_j), one number per batch row.
  for (int64_t b = 0; b < batch; ++b) {
    uint64_t c0 = 0;
    for (int j = 0; j < x_planes; ++j) {
      const uint64_t* xj = x + (b * x_planes + j) * words;
      uint64_t c = 0;
      for (int64_t i = 0; i < words; ++i) c += static_cast<uint64_t>(std::popcount(xj[i]));
      c0 = negative_term(0, 2, j, x_planes) ? c0 - (c << j) : c0 + (c << j);
    }
    for (int64_t r = 0; r < rows; ++r)
      acc[b * rows + r] = static_cast<int64_t>(static_cast<uint64_t>(acc[b * rows + r]) + c0);
  }
}

void pb_gemm_1bit(const uint64_t* w, int64_t rows, int64_t words, const uint64_t* x, int64_t batch, int x_planes,
                  int64_t* acc) {
  pb_gemm_1bit(pb_kernel(), w, rows, words, x, batch, x_planes, acc);
}

}  // namespace octet::quant::cpu
