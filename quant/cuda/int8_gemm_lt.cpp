// cuBLASLt int8 GEMM (quant/cuda/int8_gemm_lt.h). One cuBLASLt handle per device (cublasLtMatmul
// takes its stream and workspace per call, so the handle holds no per-thread state and is shared);
// per (device, shape) the descriptors and the heuristic's first algorithm, made once and kept for
// the life of the process (like cuDNN plans in core/cuda/conv.cpp, never destroyed: the driver may
// be gone at static destruction). The workspace comes from the caching allocator on each call.
#include <cublasLt.h>

#include <map>
#include <mutex>
#include <tuple>

#include "core/cuda.h"
#include "core/cuda/libraries.h"
#include "quant/cuda/int8_gemm_lt.h"

namespace octet::quant::cuda {

namespace {

constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;
// Every operand the callers pass is 16-byte aligned (rows padded to 16, fresh allocations).
constexpr uint32_t kAlignBytes = 16;

struct Plan {
  bool supported = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

std::mutex& plans_mutex() {
  static auto* m = new std::mutex();
  return *m;
}

cublasLtHandle_t handle_of(int device) {
  static auto* handles = new std::map<int, cublasLtHandle_t>();  // guarded by plans_mutex()
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  cublasLtHandle_t h = nullptr;
  OCTET_CUBLAS_CHECK(cublasLtCreate(&h));
  handles->emplace(device, h);
  return h;
}

template <typename T>
void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, T value) {
  OCTET_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value));
}

Plan* make_plan(cublasLtHandle_t h, const ops::Int8Gemm& g) {
  auto* p = new Plan();
  if (!ops::follows_int8_gemm_rules(g)) return p;
  OCTET_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  const int32_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  OCTET_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  OCTET_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
  // Stored shapes, column-major: A is k x m (op(A) = A^T is m x k), B is k x n, C (and D) m x n.
  OCTET_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8I, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.m), g.lda));
  OCTET_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8I, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.n), g.ldb));
  OCTET_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32I, static_cast<uint64_t>(g.m), static_cast<uint64_t>(g.n), g.ldc));
  cublasLtMatmulPreference_t pref = nullptr;
  OCTET_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  set_preference(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    set_preference(pref, attr, kAlignBytes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, p->op, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED / INVALID_VALUE: no kernel for this combination here (the caller takes another
  // path); anything else is a real failure.
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE)
    ::octet::cuda::fail_cublas(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS &&
      result.workspaceSize <= kWorkspaceBytes) {
    p->algo = result.algo;
    p->workspace = result.workspaceSize;
    p->supported = true;
  }
  return p;
}

// The plan of g on the current device (made on first use) and the device's handle.
const Plan& plan_of(const ops::Int8Gemm& g, cublasLtHandle_t* handle) {
  static auto* plans = new std::map<Key, const Plan*>();
  const int device = ::octet::cuda::current_device();
  std::lock_guard<std::mutex> lock(plans_mutex());
  *handle = handle_of(device);
  const Key key{device, g.m, g.n, g.k, g.lda, g.ldb, g.ldc};
  auto it = plans->find(key);
  if (it == plans->end()) it = plans->emplace(key, make_plan(*handle, g)).first;
  return *it->second;
}

}  // namespace

bool int8_gemm_supported(const ops::Int8Gemm& g) {
  cublasLtHandle_t h = nullptr;
  return plan_of(g, &h).supported;
}

void int8_gemm(const ops::Int8Gemm& g, const int8_t* a, const int8_t* b, int32_t* c) {
  cublasLtHandle_t h = nullptr;
  const Plan& p = plan_of(g, &h);
  OCTET_CHECK(p.supported, "quant::cuda::int8_gemm: cuBLASLt has no int8 algorithm for m=", g.m, " n=", g.n, " k=", g.k,
              " lda=", g.lda, " ldb=", g.ldb, " ldc=", g.ldc);
  Tensor workspace;
  if (p.workspace > 0)
    workspace = empty({static_cast<int64_t>(p.workspace)},
                      TensorOptions(DType::u8).device(Device::cuda(::octet::cuda::current_device())));
  const int32_t alpha = 1, beta = 0;
  OCTET_CUBLAS_CHECK(cublasLtMatmul(h, p.op, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &p.algo,
                                    p.workspace > 0 ? workspace.raw_data() : nullptr, p.workspace,
                                    ::octet::cuda::stream()));
}

}  // namespace octet::quant::cuda
