// CUDA runtime queries. The CUDA backend (device storage, kernels) builds on this file.
#include <cuda_runtime.h>

#include "core/device.h"

namespace octet {

int cuda_device_count() {
  int n = 0;
  // No driver or no GPU is not an error for the caller: there are simply no CUDA devices.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

bool cuda_compiled() { return true; }

}  // namespace octet
