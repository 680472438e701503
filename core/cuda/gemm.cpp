// CUDA GEMM through cuBLAS, row-major with leading dimensions like cpu::gemm. cuBLAS is
// column-major, and a row-major matrix with leading dimension ld is, read column-major, its
// transpose with the same ld; so row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T: the operands swap places and M, N swap, with the trans flags unchanged.
// f32 runs in exact FP32 unless cuda::allow_tf32() (then TF32 tensor cores); f64 in FP64; bf16 A
// and B with an f32 C, or a bf16 C rounded once from the f32 sums (autocast's products and their
// bf16 activations, core/autocast.h), on tensor cores with f32 accumulation.
//   cuda::gemm(false, true, m, n, k, 1.0, a, k, b, k, 0.0, c, n);   // C = A B^T
#include <algorithm>

#include "core/cuda.h"
#include "core/cuda/gemm.h"
#include "core/cuda/kernels.h"
#include "core/cuda/libraries.h"

namespace octet::cuda {

namespace {

// cuBLAS's recommended workspace on Hopper (4 MiB suffice on older GPUs). Each call takes its own
// from the caching allocator on the current stream: cuBLAS's default workspace is shared by all
// streams of a handle, which races when one handle serves two streams.
constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

void check_ld(const char* what, int64_t ld, int64_t cols) {
  OCTET_CHECK(ld >= std::max<int64_t>(cols, 1), "gemm: leading dimension ", what, " = ", ld,
              " is smaller than the row length ", cols);
}

// One f32 or f64 GEMM through cuBLAS's plain call, or its strided-batched one for several.
template <typename T, typename Gemm, typename Batched>
void typed_gemm(cublasHandle_t h, cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n, int64_t k,
                double alpha, const BatchOperand& a, const BatchOperand& b, double beta, const BatchOperand& c,
                int64_t batch, Gemm gemm, Batched batched) {
  const T al = static_cast<T>(alpha), be = static_cast<T>(beta);
  const auto* pa = static_cast<const T*>(a.data);
  const auto* pb = static_cast<const T*>(b.data);
  auto* pc = static_cast<T*>(const_cast<void*>(c.data));
  if (batch == 1)
    OCTET_CUBLAS_CHECK(gemm(h, op_b, op_a, n, m, k, &al, pb, b.ld, pa, a.ld, &be, pc, c.ld));
  else
    OCTET_CUBLAS_CHECK(
        batched(h, op_b, op_a, n, m, k, &al, pb, b.ld, b.stride, pa, a.ld, a.stride, &be, pc, c.ld, c.stride, batch));
}

}  // namespace

void gemm_batched(DType dtype, Device device, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  BatchOperand a, BatchOperand b, double beta, BatchOperand c, int64_t batch, bool bf16_c) {
  OCTET_CHECK(dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16,
              "gemm: expected dtype f32, f64 or bf16, got ", dtype);
  OCTET_CHECK(!bf16_c || dtype == DType::bf16, "gemm: a bf16 C takes bf16 operands, got ", dtype);
  OCTET_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "gemm: negative size M=", m, " N=", n, " K=", k,
              " batch=", batch);
  if (m == 0 || n == 0 || batch == 0) return;
  // Row lengths of the stored (row-major) matrices: A is [M,K] or [K,M], B is [K,N] or [N,K].
  check_ld("lda", a.ld, trans_a ? m : k);
  check_ld("ldb", b.ld, trans_b ? k : n);
  check_ld("ldc", c.ld, n);

  cublasHandle_t h = cublas_handle();
  Tensor workspace = empty({kWorkspaceBytes}, TensorOptions(DType::u8).device(device));
  OCTET_CUBLAS_CHECK(cublasSetWorkspace(h, workspace.raw_data(), static_cast<size_t>(kWorkspaceBytes)));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (dtype == DType::bf16) {  // bf16 A and B, f32 (or bf16) C, f32 accumulation (tensor cores)
    // A bf16 C is rounded once from the f32 sums, as on the CPU: cuBLAS may otherwise add split-K
    // partial sums in the output type (PyTorch's allow_bf16_reduced_precision_reduction, on there).
    OCTET_CUBLAS_CHECK(cublasSetMathMode(
        h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
    const cudaDataType_t c_type = bf16_c ? CUDA_R_16BF : CUDA_R_32F;
    if (batch == 1)
      OCTET_CUBLAS_CHECK(cublasGemmEx_64(h, op_b, op_a, n, m, k, &al, b.data, CUDA_R_16BF, b.ld, a.data, CUDA_R_16BF,
                                         a.ld, &be, const_cast<void*>(c.data), c_type, c.ld, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT));
    else
      OCTET_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
          h, op_b, op_a, n, m, k, &al, b.data, CUDA_R_16BF, b.ld, b.stride, a.data, CUDA_R_16BF, a.ld, a.stride, &be,
          const_cast<void*>(c.data), c_type, c.ld, c.stride, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else if (dtype == DType::f32) {
    // CUBLAS_DEFAULT_MATH keeps FP32 inputs and FP32 accumulation; TF32 only when asked for.
    OCTET_CUBLAS_CHECK(cublasSetMathMode(h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    typed_gemm<float>(h, op_a, op_b, m, n, k, alpha, a, b, beta, c, batch, cublasSgemm_64,
                      cublasSgemmStridedBatched_64);
  } else {
    OCTET_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    typed_gemm<double>(h, op_a, op_b, m, n, k, alpha, a, b, beta, c, batch, cublasDgemm_64,
                       cublasDgemmStridedBatched_64);
  }
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const Tensor& a, int64_t lda,
          const Tensor& b, int64_t ldb, double beta, const Tensor& c, int64_t ldc) {
  const bool bf16 = a.dtype() == DType::bf16 && b.dtype() == DType::bf16 && c.dtype() == DType::f32;
  const bool bf16_c = a.dtype() == DType::bf16 && b.dtype() == DType::bf16 && c.dtype() == DType::bf16;
  OCTET_CHECK(bf16 || (a.dtype() == b.dtype() && a.dtype() == c.dtype()), "gemm: dtypes differ: ", a.dtype(), ", ",
              b.dtype(), ", ", c.dtype(), " (bf16 operands take an f32 or bf16 C)");
  // As the CPU's: a bf16 C is written, not accumulated into (it would be rounded twice).
  OCTET_CHECK(!bf16_c || beta == 0.0, "gemm: a bf16 C takes beta 0, got ", beta);
  gemm_batched(a.dtype(), c.device(), trans_a, trans_b, m, n, k, alpha, {a.raw_data(), lda, 0}, {b.raw_data(), ldb, 0},
               beta, {c.raw_data(), ldc, 0}, 1, bf16_c);
}

}  // namespace octet::cuda
