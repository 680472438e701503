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

// t widened to a new contiguous f32 tensor on its device (exact for bf16): for kernels that run a
// bf16 operand through their f32 path (as cpu::widened_to_f32 on the CPU).
Tensor widened_to_f32(const Tensor& t);

using kernels::AttentionGeometry;
using kernels::Conv2dGeometry;
using kernels::Pool2dGeometry;

#define OCTET_CPU_KERNEL(ret, name, params, args)  // CPU-only: no CUDA version
#include "core/kernel_signatures.inc"              // IWYU pragma: export

}  // namespace octet::cuda
