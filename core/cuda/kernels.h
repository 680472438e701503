// CUDA implementations of core/'s kernel list (core/kernel_signatures.inc, the same signatures as
// core/kernels.h), reached through the device dispatch in core/kernels.cpp. Pure C++ declarations: no CUDA headers
// here.
#pragma once

#include "core/kernels.h"

namespace octet::cuda {

// Makes a device current for a scope (nothing to do when it already is). The dispatch in
// core/kernels.cpp holds one around every kernel, so kernels and library calls run on the device
// their tensors live on.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0, device_ = 0;
};

using kernels::AttentionGeometry;
using kernels::Conv2dGeometry;
using kernels::Pool2dGeometry;

#define OCTET_CPU_KERNEL(ret, name, params, args)  // CPU-only: no CUDA version
#include "core/kernel_signatures.inc"  // IWYU pragma: export

}  // namespace octet::cuda
