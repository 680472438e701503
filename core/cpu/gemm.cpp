// CPU GEMM: f32 through oneDNN's sgemm (measured faster than Eigen here, see DESIGN.md and
// tools/bench/RESULTS.md), f64 through Eigen (oneDNN has no f64 GEMM; f64 is for gradient checks).
// bf16 A and B with an f32 C, or a bf16 C when beta is 0 (autocast's products, core/autocast.h):
// oneDNN's bf16 matmul where the CPU has native bf16 (cpu::bf16_selector()), else the operands
// widened to f32 and sgemm: the same products (a bf16 times a bf16 is exact in f32), summed in f32
// either way, and a bf16 C rounded once from the f32 sum.
#include <oneapi/dnnl/dnnl.h>

#include <Eigen/Core>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "core/cpu/bf16.h"
#include "core/cpu/isa.h"
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

namespace octet::cpu {

namespace {

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, double beta, float* c, int64_t ldc) {
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, static_cast<float>(alpha), a, lda, b,
                                ldb, static_cast<float>(beta), c, ldc);
  OCTET_CHECK(st == dnnl_success, "gemm: oneDNN sgemm failed with status ", static_cast<int>(st), " for M=", m,
              " N=", n, " K=", k);
}

// The elements a row-major [rows, cols] matrix with leading dimension ld spans.
int64_t span(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols; }

using MatmulKey = std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, double, double, bool>;

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// oneDNN's bf16 x bf16 -> f32 (or, with the key's last flag, bf16) matmul for one shape, created
// once (creation JIT-compiles). alpha is an output scale, beta a sum post-op.
dnnl::matmul& bf16_matmul(const MatmulKey& key) {
  static std::map<MatmulKey, std::unique_ptr<dnnl::matmul>> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  const auto [m, n, k, ta, tb, lda, ldb, ldc, alpha, beta, bf16_c] = key;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc a_md({m, k}, dt::bf16, ta ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
  dnnl::memory::desc b_md({k, n}, dt::bf16, tb ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
  dnnl::memory::desc c_md({m, n}, bf16_c ? dt::bf16 : dt::f32, dnnl::memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  if (alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(alpha)});
  if (beta != 0.0) {
    dnnl::post_ops ops;
    ops.append_sum(static_cast<float>(beta));
    attr.set_post_ops(ops);
  }
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine());
    return *cache.emplace(key, std::make_unique<dnnl::matmul>(pd)).first->second;
  } catch (const dnnl::error& e) {
    OCTET_FAIL("gemm: oneDNN could not create a bf16 matmul for M=", m, " N=", n, " K=", k, ": ", e.what());
  }
}

std::mutex bf16_mutex;  // the cache, and the shared primitives' execution

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
               const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc) {
  const bool bf16_c = c.dtype() == DType::bf16;  // then beta is 0
  if (bf16_c && (k == 0 || bf16_selector().active() == Bf16Path::emulated)) {
    Tensor c32 = empty({span(m, n, ldc)}, DType::f32);
    gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, 0.0, c32, ldc);
    for (int64_t i = 0; i < m; ++i) round_to_bf16(c32.data<float>() + i * ldc, c.data<BFloat16>() + i * ldc, n);
    return;
  }
  if (k == 0) {  // C = beta C, as BLAS defines it
    sgemm(trans_a, trans_b, m, n, 0, alpha, nullptr, std::max<int64_t>(lda, 1), nullptr, std::max<int64_t>(ldb, 1),
          beta, c.data<float>(), ldc);
    return;
  }
  if (bf16_selector().active() == Bf16Path::emulated) {
    const int64_t na = trans_a ? span(k, m, lda) : span(m, k, lda), nb = trans_b ? span(n, k, ldb) : span(k, n, ldb);
    Tensor wa = empty({na}, DType::f32), wb = empty({nb}, DType::f32);
    widen_bf16(a.data<BFloat16>(), wa.data<float>(), na);
    widen_bf16(b.data<BFloat16>(), wb.data<float>(), nb);
    sgemm(trans_a, trans_b, m, n, k, alpha, wa.data<float>(), lda, wb.data<float>(), ldb, beta, c.data<float>(), ldc);
    return;
  }
  std::lock_guard<std::mutex> lock(bf16_mutex);
  dnnl::matmul& mm = bf16_matmul({m, n, k, trans_a, trans_b, lda, ldb, ldc, alpha, beta, bf16_c});
  using dt = dnnl::memory::data_type;
  auto mem = [](const dnnl::memory::dims& dims, dt type, const dnnl::memory::dims& strides, const Tensor& t) {
    return dnnl::memory(dnnl::memory::desc(dims, type, strides), engine(), t.raw_data());
  };
  dnnl::stream s(engine());
  mm.execute(
      s,
      {{DNNL_ARG_SRC, mem({m, k}, dt::bf16, trans_a ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1}, a)},
       {DNNL_ARG_WEIGHTS, mem({k, n}, dt::bf16, trans_b ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1}, b)},
       {DNNL_ARG_DST, mem({m, n}, bf16_c ? dt::bf16 : dt::f32, {ldc, 1}, c)}});
  s.wait();
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
          const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc) {
  check_cpu("gemm", {a, b, c});
  if (a.dtype() == DType::bf16 && b.dtype() == DType::bf16 &&
      (c.dtype() == DType::f32 || (c.dtype() == DType::bf16 && beta == 0.0))) {
    if (m > 0 && n > 0) gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  OCTET_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), "gemm: dtypes differ: ", a.dtype(), ", ", b.dtype(),
              ", ", c.dtype(), " (bf16 operands take an f32 C, or a bf16 C with beta 0)");
  if (m == 0 || n == 0) return;
  if (a.dtype() == DType::f32) {
    sgemm(trans_a, trans_b, m, n, k, alpha, a.data<float>(), lda, b.data<float>(), ldb, beta, c.data<float>(), ldc);
    return;
  }
  OCTET_CHECK(a.dtype() == DType::f64, "gemm: expected dtype f32 or f64, got ", a.dtype());
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  Map ma(a.data<double>(), trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  Map mb(b.data<double>(), trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> mc(c.data<double>(), m, n, Eigen::OuterStride<>(ldc));
  Mat prod = (trans_a ? Mat(ma.transpose()) : Mat(ma)) * (trans_b ? Mat(mb.transpose()) : Mat(mb));
  if (beta == 0.0)
    mc = alpha * prod;
  else
    mc = alpha * prod + beta * mc;
}

}  // namespace octet::cpu
