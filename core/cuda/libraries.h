// cuBLAS and cuDNN for octet's CUDA kernels: status checks that throw octet::Error, and one handle
// per thread and device (a handle must not be used by two threads at once).
// Host-compiled sources under core/cuda/ (and quant/cuda/) include this; no other code does.
//   cublasHandle_t h = cublas_handle();  // current device's, already on stream()
//   OCTET_CUBLAS_CHECK(cublasSgemm_64(h, ...));
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include "core/cuda/cuda_util.h"

namespace octet::cuda {

[[noreturn]] void fail_cublas(cublasStatus_t s, const char* expr, const char* file, int line);
[[noreturn]] void fail_cudnn(cudnnStatus_t s, const char* expr, const char* file, int line);

// This thread's handle for the current device, created on first use, bound to stream(). A thread
// that ends gives its handles back to a per-device pool for the next thread; they are never
// destroyed, since at process exit the driver may already be gone.
cublasHandle_t cublas_handle();
cudnnHandle_t cudnn_handle();

}  // namespace octet::cuda

#define OCTET_CUBLAS_CHECK(expr)                                               \
  do {                                                                         \
    cublasStatus_t octet_cublas_st_ = (expr);                                  \
    if (octet_cublas_st_ != CUBLAS_STATUS_SUCCESS)                             \
      ::octet::cuda::fail_cublas(octet_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

#define OCTET_CUDNN_CHECK(expr)                                              \
  do {                                                                       \
    cudnnStatus_t octet_cudnn_st_ = (expr);                                  \
    if (octet_cudnn_st_ != CUDNN_STATUS_SUCCESS)                             \
      ::octet::cuda::fail_cudnn(octet_cudnn_st_, #expr, __FILE__, __LINE__); \
  } while (0)
