// CPU paths of the zero-point GEMM (quant/cpu/qgemm.h): operand reduction to u8 x s8, the raw
// products (portable loops, the x86 kernels of qgemm_x86.cpp, oneDNN), the offset fold, and the
// per-row activation quantizer of qlinear.
#include "quant/cpu/qgemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/cpu/int8_gemm.h"
#include "quant/cpu/qgemm_detail.h"

namespace octet::quant::cpu {

namespace {

QgemmPath resolve(QgemmPath p, int64_t m) {
  if (p != QgemmPath::automatic) return p;
  if (m > kQGemmKernelMaxM && dnnl_u8s8_gemm_exact()) return QgemmPath::dnnl;
  if (detail::vnni_available()) return QgemmPath::avx512_vnni;
  if (detail::avx2_available()) return QgemmPath::avx2;
  return QgemmPath::portable;
}

// sum a[i] * b[i], u8 x s8
int32_t dot_u8s8(const uint8_t* a, const int8_t* b, int64_t k) {
  return octet::cpu::simd_dispatch([=] {
    int32_t s = 0;
    for (int64_t t = 0; t < k; ++t) s += static_cast<int32_t>(a[t]) * static_cast<int32_t>(b[t]);
    return s;
  });
}

template <typename T>
int32_t row_sum(const T* x, int64_t k) {
  return octet::cpu::simd_dispatch([=] {
    int32_t s = 0;
    for (int64_t t = 0; t < k; ++t) s += static_cast<int32_t>(x[t]);
    return s;
  });
}

// d[i, j] = sum_k a[i, k] b[j, k] for columns [j0, j1) on path p (not dnnl).
void raw_dot(QgemmPath p, int64_t m, int64_t j0, int64_t j1, int64_t k, const uint8_t* a, int64_t lda, const int8_t* b,
             int64_t ldb, int32_t* d, int64_t ldd) {
  switch (p) {
    case QgemmPath::avx512_vnni:
      detail::raw_dot_avx512_vnni(m, j0, j1, k, a, lda, b, ldb, d, ldd);
      return;
    case QgemmPath::avx2:
      detail::raw_dot_avx2(m, j0, j1, k, a, lda, b, ldb, d, ldd);
      return;
    default:
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = 0; i < m; ++i) d[i * ldd + j] = dot_u8s8(a + i * lda, b + j * ldb, k);
  }
}

// c[i, j] = d[i, j] - za[i] sb[j] - zb sa[i] + k za[i] zb over columns [j0, j1). The true value fits
// in int32, so arithmetic modulo 2^32 gives it exactly (and vectorizes).
void fold(int64_t m, int64_t j0, int64_t j1, int64_t k, const int32_t* za, const int32_t* sa, int32_t zb,
          const int32_t* sb, int32_t* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    const auto zai = static_cast<uint32_t>(za[i]);
    const uint32_t row_term = static_cast<uint32_t>(k) * zai * static_cast<uint32_t>(zb) -
                              static_cast<uint32_t>(zb) * static_cast<uint32_t>(sa[i]);
    int32_t* ci = c + i * ldc;
    octet::cpu::simd_dispatch([=] {
      for (int64_t j = j0; j < j1; ++j)
        ci[j] = static_cast<int32_t>(static_cast<uint32_t>(ci[j]) - zai * static_cast<uint32_t>(sb[j]) + row_term);
    });
  }
}

// The u8 x s8 core: a u8 with za (per row), b s8 with zb, sb[j] = sum_k b[j, k].
void qgemm_u8s8(QgemmPath p, int64_t m, int64_t n, int64_t k, const uint8_t* a, int64_t lda, const int32_t* za,
                const int8_t* b, int64_t ldb, int32_t zb, const int32_t* sb, int32_t* c, int64_t ldc) {
  std::vector<int32_t> sa(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) sa[i] = row_sum(a + i * lda, k);
  if (p == QgemmPath::dnnl) {
    const int32_t c_offset = 0;
    const dnnl_status_t st =
        dnnl_gemm_u8s8s32('N', 'T', 'F', m, n, k, 1.0f, a, lda, 0, b, ldb, 0, 0.0f, c, ldc, &c_offset);
    OCTET_CHECK(st == dnnl_success, "qgemm: oneDNN u8s8s32 GEMM failed with status ", static_cast<int>(st),
                " for m=", m, " n=", n, " k=", k);
    parallel_for(0, n, 256, [&](int64_t j0, int64_t j1) { fold(m, j0, j1, k, za, sa.data(), zb, sb, c, ldc); });
    return;
  }
  // Enough multiply-adds per chunk to pay for a thread; chunks of whole register tiles.
  const int64_t grain = std::max<int64_t>(8, (int64_t{1} << 18) / std::max<int64_t>(1, m * k));
  parallel_for(0, n, grain, [&](int64_t j0, int64_t j1) {
    raw_dot(p, m, j0, j1, k, a, lda, b, ldb, c, ldc);
    fold(m, j0, j1, k, za, sa.data(), zb, sb, c, ldc);
  });
}

struct RowRange {
  float lo, hi;  // widened to hold 0; an infinity shows here
  bool nan;
};

// In 16 independent lanes so the compiler vectorizes the scan (min and max do not depend on the
// order, and a NaN is counted apart, so the lanes give the plain loop's result).
RowRange row_range(const float* x, int64_t n) {
  return octet::cpu::simd_dispatch([=] {
    constexpr int kLanes = 16;
    float lo[kLanes] = {}, hi[kLanes] = {};
    int32_t nan[kLanes] = {};
    int64_t t = 0;
    for (; t + kLanes <= n; t += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float v = x[t + l];
        lo[l] = v < lo[l] ? v : lo[l];
        hi[l] = v > hi[l] ? v : hi[l];
        nan[l] |= static_cast<int32_t>(v != v);
      }
    for (int l = 0; t < n; ++t, ++l) {
      const float v = x[t];
      lo[l] = v < lo[l] ? v : lo[l];
      hi[l] = v > hi[l] ? v : hi[l];
      nan[l] |= static_cast<int32_t>(v != v);
    }
    RowRange r{0.0f, 0.0f, false};
    for (int l = 0; l < kLanes; ++l) {
      r.lo = lo[l] < r.lo ? lo[l] : r.lo;
      r.hi = hi[l] > r.hi ? hi[l] : r.hi;
      r.nan = r.nan || nan[l] != 0;
    }
    return r;
  });
}

}  // namespace

bool qgemm_path_supported(QgemmPath p) {
  switch (p) {
    case QgemmPath::automatic:
    case QgemmPath::portable:
      return true;
    case QgemmPath::avx2:
      return detail::avx2_available();
    case QgemmPath::avx512_vnni:
      return detail::vnni_available();
    case QgemmPath::dnnl:
      return dnnl_u8s8_gemm_exact();
  }
  return false;
}

Selector<QgemmPath>& qgemm_selector() {
  static Selector<QgemmPath> selector{"zero-point GEMM path",
                                      "OCTET_QGEMM_PATH",
                                      {{QgemmPath::automatic, "auto"},
                                       {QgemmPath::portable, "portable"},
                                       {QgemmPath::avx2, "avx2"},
                                       {QgemmPath::avx512_vnni, "avx512_vnni"},
                                       {QgemmPath::dnnl, "dnnl"}},
                                      qgemm_path_supported,
                                      [] { return QgemmPath::automatic; }};
  return selector;
}

std::string_view qgemm_path_name(QgemmPath p) { return qgemm_selector().name(p); }
QgemmPath qgemm_path() { return qgemm_selector().active(); }
QgemmPath set_qgemm_path(QgemmPath p) { return qgemm_selector().set(p); }

void qgemm_row_sums(int64_t n, int64_t k, QType tb, const void* b, int64_t ldb, int32_t* sums) {
  for (int64_t j = 0; j < n; ++j)
    sums[j] = tb == QType::s8 ? row_sum(static_cast<const int8_t*>(b) + j * ldb, k)
                              : row_sum(static_cast<const uint8_t*>(b) + j * ldb, k);
}

void qgemm(QgemmPath p, int64_t m, int64_t n, int64_t k, QType ta, const void* a, int64_t lda, const int32_t* za,
           QType tb, const void* b, int64_t ldb, int32_t zb, int32_t* c, int64_t ldc, const int32_t* b_row_sums) {
  OCTET_CHECK(qgemm_path_supported(p), "qgemm: path ", qgemm_path_name(p), " is not supported on this CPU");
  if (m == 0 || n == 0) return;
  p = resolve(p, m);
  // s8 A -> u8 (a + 128, za + 128): flipping the sign bit adds 128.
  std::vector<uint8_t> a_u8;
  std::vector<int32_t> za_u8;
  const auto* au = static_cast<const uint8_t*>(a);
  if (ta == QType::s8) {
    a_u8.resize(static_cast<size_t>(m * k));
    za_u8.resize(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t t = 0; t < k; ++t) a_u8[i * k + t] = static_cast<uint8_t>(au[i * lda + t] ^ 0x80u);
      za_u8[i] = za[i] + 128;
    }
    au = a_u8.data();
    lda = k;
    za = za_u8.data();
  }
  // u8 B -> s8 (b - 128, zb - 128).
  std::vector<int8_t> b_s8;
  const auto* bs = static_cast<const int8_t*>(b);
  std::vector<int32_t> sb(static_cast<size_t>(n));
  if (b_row_sums != nullptr)
    std::copy(b_row_sums, b_row_sums + n, sb.begin());
  else
    qgemm_row_sums(n, k, tb, b, ldb, sb.data());
  if (tb == QType::u8) {
    b_s8.resize(static_cast<size_t>(n * k));
    const auto* bu = static_cast<const uint8_t*>(b);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t t = 0; t < k; ++t) b_s8[j * k + t] = static_cast<int8_t>(bu[j * ldb + t] ^ 0x80u);
      sb[j] -= static_cast<int32_t>(128 * k);
    }
    bs = b_s8.data();
    ldb = k;
    zb -= 128;
  }
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0);
    return;
  }
  qgemm_u8s8(p, m, n, k, au, lda, za, bs, ldb, zb, sb.data(), c, ldc);
}

void quantize_rows_u8(const float* x, int64_t batch, int64_t cols, uint8_t* codes, float* scale, int32_t* zero_point) {
  for (int64_t r = 0; r < batch; ++r) {
    const float* xr = x + r * cols;
    uint8_t* qr = codes + r * cols;
    const RowRange range = row_range(xr, cols);
    const float lo = range.lo, hi = range.hi;
    if (range.nan || !std::isfinite(lo) || !std::isfinite(hi)) {
      scale[r] = std::numeric_limits<float>::quiet_NaN();
      zero_point[r] = 0;
      std::fill(qr, qr + cols, uint8_t{0});
      continue;
    }
    const QParams p = choose_qparams(lo, hi, QType::u8);
    scale[r] = p.scale;
    zero_point[r] = p.zero_point;
    quantize_array(xr, cols, p, qr);
  }
}

}  // namespace octet::quant::cpu
