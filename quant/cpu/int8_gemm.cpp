// int8 GEMM paths (quant/cpu/int8_gemm.h): oneDNN's s8s8s32 GEMM and the plain reference loops (the
// AVX2 kernel is in int8_gemm_x86.cpp).
#include "quant/cpu/int8_gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/cpu/int8_gemm_detail.h"

namespace octet::quant::cpu {

namespace {

// c[j] += a * b[j]
void axpy_row(int32_t a, const int8_t* b, int64_t n, int32_t* c) {
  return octet::cpu::simd_dispatch([=] {
    for (int64_t j = 0; j < n; ++j) c[j] += a * static_cast<int32_t>(b[j]);
  });
}

// sum a[i] * b[i]
int32_t dot_row(const int8_t* a, const int8_t* b, int64_t n) {
  return octet::cpu::simd_dispatch([=] {
    int32_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
    return s;
  });
}

void gemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
                    const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, n * k));
  parallel_for(0, m, grain, [&](int64_t i0, int64_t i1) {
    std::vector<int8_t> arow(static_cast<size_t>(k));  // row i of op(A), contiguous
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t kk = 0; kk < k; ++kk) arow[kk] = trans_a ? a[kk * lda + i] : a[i * lda + kk];
      int32_t* crow = c + i * ldc;
      if (trans_b) {
        for (int64_t j = 0; j < n; ++j) crow[j] = (accumulate ? crow[j] : 0) + dot_row(arow.data(), b + j * ldb, k);
      } else {
        if (!accumulate) std::fill(crow, crow + n, 0);
        for (int64_t kk = 0; kk < k; ++kk)
          if (arow[kk] != 0) axpy_row(arow[kk], b + kk * ldb, n, crow);
      }
    }
  });
}

void gemm_dnnl(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  const int32_t c_offset = 0;
  // alpha 1 and beta 0 or 1: oneDNN adds the int32 products exactly (tested with accumulation).
  const dnnl_status_t st = dnnl_gemm_s8s8s32(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', 'F', m, n, k, 1.0f, a, lda, 0, b,
                                             ldb, 0, accumulate ? 1.0f : 0.0f, c, ldc, &c_offset);
  OCTET_CHECK(st == dnnl_success, "int8_gemm: oneDNN s8s8s32 GEMM failed with status ", static_cast<int>(st),
              " for M=", m, " N=", n, " K=", k, " lda=", lda, " ldb=", ldb, " ldc=", ldc);
}

// A product whose u8 x s8 pair sums overflow s16 (255 * 127 * 2 > 32767) where oneDNN lacks VNNI,
// plus pseudo-random codes over the whole range, against the reference loops. u8_a: A's codes
// shifted by +128 into uint8 and multiplied by dnnl_gemm_u8s8s32 (the sums shift by 128 * B's
// column sums).
bool probe_dnnl_exact(bool u8_a) {
  constexpr int64_t m = 7, n = 9, k = 67;
  std::vector<int8_t> a(m * k), b(k * n);
  uint32_t state = 12345u;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int8_t>(static_cast<int32_t>(state >> 24) - 128);
  };
  for (int64_t i = 0; i < m * k; ++i) a[i] = i < 2 * k ? (i < k ? 127 : -127) : next();
  for (int64_t i = 0; i < k * n; ++i) b[i] = i % n < 2 ? (i % n == 0 ? 127 : -127) : next();
  std::vector<int32_t> want(m * n), got(m * n, -1);
  gemm_reference(false, false, m, n, k, a.data(), k, b.data(), n, want.data(), n, false);
  const int32_t c_offset = 0;
  dnnl_status_t st;
  if (u8_a) {
    std::vector<uint8_t> au(m * k);
    for (int64_t i = 0; i < m * k; ++i) au[i] = static_cast<uint8_t>(a[i] + 128);
    for (int64_t j = 0; j < n; ++j) {
      int32_t col = 0;
      for (int64_t kk = 0; kk < k; ++kk) col += b[kk * n + j];
      for (int64_t i = 0; i < m; ++i) want[i * n + j] += 128 * col;
    }
    st = dnnl_gemm_u8s8s32('N', 'N', 'F', m, n, k, 1.0f, au.data(), k, 0, b.data(), n, 0, 0.0f, got.data(), n,
                           &c_offset);
  } else {
    st =
        dnnl_gemm_s8s8s32('N', 'N', 'F', m, n, k, 1.0f, a.data(), k, 0, b.data(), n, 0, 0.0f, got.data(), n, &c_offset);
  }
  return st == dnnl_success && got == want;
}

Int8GemmPath best_path() {
  if (dnnl_int8_gemm_exact()) return Int8GemmPath::dnnl;
  return int8_gemm_path_supported(Int8GemmPath::avx2) ? Int8GemmPath::avx2 : Int8GemmPath::reference;
}

}  // namespace

Selector<Int8GemmPath>& int8_gemm_selector() {
  static Selector<Int8GemmPath> selector{"int8 GEMM path",
                                         "OCTET_INT8_GEMM_PATH",
                                         {{Int8GemmPath::reference, "reference"},
                                          {Int8GemmPath::avx2, "avx2"},
                                          {Int8GemmPath::dnnl, "dnnl"}},
                                         int8_gemm_path_supported,
                                         best_path};
  return selector;
}

std::string_view int8_gemm_path_name(Int8GemmPath path) { return int8_gemm_selector().name(path); }

bool dnnl_int8_gemm_exact() {
  static const bool exact = probe_dnnl_exact(false);
  return exact;
}

bool dnnl_u8s8_gemm_exact() {
  static const bool exact = probe_dnnl_exact(true);
  return exact;
}

bool int8_gemm_path_supported(Int8GemmPath path) {
  switch (path) {
    case Int8GemmPath::reference:
      return true;
    case Int8GemmPath::avx2:
#ifdef OCTET_CPU_X86
      return octet::cpu::isa_supported(octet::cpu::Isa::avx2);
#else
      return false;
#endif
    case Int8GemmPath::dnnl:
      return dnnl_int8_gemm_exact();
  }
  return false;
}

Int8GemmPath int8_gemm_path() { return int8_gemm_selector().active(); }
Int8GemmPath set_int8_gemm_path(Int8GemmPath path) { return int8_gemm_selector().set(path); }

void int8_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a, int64_t lda,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  int8_gemm(int8_gemm_path(), trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void int8_gemm(Int8GemmPath path, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const int8_t* a,
               int64_t lda, const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool accumulate) {
  OCTET_CHECK(m >= 0 && n >= 0 && k >= 0, "int8_gemm: expected nonnegative sizes, got M=", m, " N=", n, " K=", k);
  OCTET_CHECK(lda >= std::max<int64_t>(1, trans_a ? m : k) && ldb >= std::max<int64_t>(1, trans_b ? k : n) &&
                  ldc >= std::max<int64_t>(1, n),
              "int8_gemm: leading dimensions too small for M=", m, " N=", n, " K=", k, " (trans_a ", trans_a,
              ", trans_b ", trans_b, "): lda=", lda, " ldb=", ldb, " ldc=", ldc);
  OCTET_CHECK(int8_gemm_path_supported(path), "int8_gemm: path ", int8_gemm_path_name(path),
              " is not supported on this CPU");
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0);
    return;
  }
  switch (path) {
    case Int8GemmPath::dnnl:
      return gemm_dnnl(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
    case Int8GemmPath::avx2:
#ifdef OCTET_CPU_X86
      return detail::int8_gemm_avx2(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
#endif
    case Int8GemmPath::reference:
      break;
  }
  gemm_reference(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

}  // namespace octet::quant::cpu
