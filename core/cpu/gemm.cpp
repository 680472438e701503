// CPU GEMM: f32 through oneDNN's sgemm (measured faster than Eigen here, see DESIGN.md and
// tools/bench/RESULTS.md), f64 through Eigen (oneDNN has no f64 GEMM; f64 is for gradient checks).
#include <oneapi/dnnl/dnnl.h>
#include <Eigen/Core>

#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"

namespace octet::cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
          const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc) {
  check_cpu("gemm", {a, b, c});
  OCTET_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(), "gemm: dtypes differ: ", a.dtype(), ", ", b.dtype(),
              ", ", c.dtype());
  if (m == 0 || n == 0) return;
  if (a.dtype() == DType::f32) {
    dnnl_status_t st =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, static_cast<float>(alpha), a.data<float>(), lda,
                   b.data<float>(), ldb, static_cast<float>(beta), c.data<float>(), ldc);
    OCTET_CHECK(st == dnnl_success, "gemm: oneDNN sgemm failed with status ", static_cast<int>(st), " for M=", m,
                " N=", n, " K=", k);
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
