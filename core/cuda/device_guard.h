// DeviceGuard: makes a device current for a scope, so that kernels and library calls run where
// the tensors live (nothing to do when it already is current). Includes CUDA headers: core/cuda/
// and quant/cuda/ sources only.
//   DeviceGuard on(x.device().index);
#pragma once

#include "core/cuda/cuda_util.h"

namespace octet::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    OCTET_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_) OCTET_CUDA_CHECK(cudaSetDevice(device_));
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);  // a destructor must not throw
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0, device_ = 0;
};

}  // namespace octet::cuda
