// Internal helpers of the CUDA backend (includes CUDA headers: only core/cuda/ and quant/cuda/
// sources include it). Every CUDA, cuBLAS and cuDNN call is checked and a failure becomes an
// octet::Error naming the call, the file and line, and the library's own message.
//   OCTET_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream()));
//   my_kernel<<<grid_for(n), kThreads, 0, stream()>>>(...);  OCTET_CUDA_LAUNCH("my_kernel");
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace octet::cuda {

[[noreturn]] void fail_cuda(cudaError_t e, const char* expr, const char* file, int line);
// Throws when the last kernel launch (or an earlier asynchronous operation) failed.
void check_launch(const char* kernel, const char* file, int line);

// The current stream of this thread as a cudaStream_t (see cuda::current_stream()).
cudaStream_t stream();

constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never zero.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 16));
}

}  // namespace octet::cuda

#define OCTET_CUDA_CHECK(expr)                                                                  \
  do {                                                                                          \
    cudaError_t octet_cuda_err_ = (expr);                                                       \
    if (octet_cuda_err_ != cudaSuccess) ::octet::cuda::fail_cuda(octet_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports a bad launch configuration (or an earlier asynchronous fault).
#define OCTET_CUDA_LAUNCH(name) ::octet::cuda::check_launch(name, __FILE__, __LINE__)
