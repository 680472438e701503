// Library handles and status checks behind core/cuda/libraries.h.
#include "core/cuda/libraries.h"

#include <mutex>
#include <vector>

namespace octet::cuda {

void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  OCTET_FAIL("cuBLAS error ", cublasGetStatusName(s), " ('", cublasGetStatusString(s), "') in ", expr, " at ", file,
             ":", line);
}

void fail_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));  // cuDNN 9 says which argument it refused
  OCTET_FAIL("cuDNN error ", cudnnGetErrorString(s), " in ", expr, " at ", file, ":", line, detail[0] ? " (" : "",
             detail, detail[0] ? ")" : "");
}

namespace {

// One handle per (thread, device), made by Create on first use; handles of finished threads wait
// in a pool for the next thread. The pool is never destroyed (thread_local destructors of the
// main thread may run during static destruction).
template <typename Handle, Handle (*Create)()>
Handle thread_handle() {
  struct Pool {
    std::mutex mutex;
    std::vector<std::vector<Handle>> free;  // by device
  };
  static Pool* pool = new Pool();
  struct Mine {
    std::vector<Handle> by_device;
    ~Mine() {
      std::lock_guard<std::mutex> lock(pool->mutex);
      for (size_t d = 0; d < by_device.size(); ++d) {
        if (by_device[d] == nullptr) continue;
        if (pool->free.size() <= d) pool->free.resize(d + 1);
        pool->free[d].push_back(by_device[d]);
      }
    }
  };
  thread_local Mine mine;
  int device = 0;
  OCTET_CUDA_CHECK(cudaGetDevice(&device));
  const size_t d = static_cast<size_t>(device);
  if (mine.by_device.size() <= d) mine.by_device.resize(d + 1, nullptr);
  Handle& h = mine.by_device[d];
  if (h == nullptr) {
    {
      std::lock_guard<std::mutex> lock(pool->mutex);
      if (pool->free.size() > d && !pool->free[d].empty()) {
        h = pool->free[d].back();
        pool->free[d].pop_back();
      }
    }
    if (h == nullptr) h = Create();  // on the current device
  }
  return h;
}

cublasHandle_t create_cublas() {
  cublasHandle_t h = nullptr;
  OCTET_CUBLAS_CHECK(cublasCreate(&h));
  return h;
}

cudnnHandle_t create_cudnn() {
  cudnnHandle_t h = nullptr;
  OCTET_CUDNN_CHECK(cudnnCreate(&h));
  return h;
}

}  // namespace

cublasHandle_t cublas_handle() {
  cublasHandle_t h = thread_handle<cublasHandle_t, create_cublas>();
  // Also resets cuBLAS's workspace to its default pool; gemm sets its own after this.
  OCTET_CUBLAS_CHECK(cublasSetStream(h, stream()));
  return h;
}

cudnnHandle_t cudnn_handle() {
  cudnnHandle_t h = thread_handle<cudnnHandle_t, create_cudnn>();
  OCTET_CUDNN_CHECK(cudnnSetStream(h, stream()));
  return h;
}

}  // namespace octet::cuda
