// core/'s dispatch point: the functions of octet::kernels, one per entry of
// core/kernel_signatures.inc, written by the list itself. Each checks that its tensors share one
// device and runs cpu:: or cuda:: there (core/kernel_dispatch.h); copy, which may cross devices,
// is the one written by hand.
#include "core/kernels.h"

#include "core/cpu/kernels.h"
#include "core/cuda.h"
#include "core/kernel_dispatch.h"

namespace octet {

void no_kernel_in_build(const char* kernel, Device d) {
  OCTET_FAIL(kernel, ": no kernel for device ", d, " in this build (CPU only; configure with -DOCTET_CUDA=ON)");
}

void no_cuda_kernel(const char* kernel, Device d) {
  OCTET_FAIL(kernel, ": no kernel for device ", d, " (it runs on the CPU only)");
}

namespace kernels {

void copy(const Tensor& dst, const Tensor& src) {
  if (dst.device() != src.device()) {
    // Across devices: move src as it is (contiguous, its own dtype) to dst's device, then the
    // same-device copy does broadcasting, dtype conversion and dst's strides.
    Tensor moved = empty(src.shape(), TensorOptions(src.dtype()).device(dst.device()));
    cuda::copy_between_devices(moved, src.contiguous(), false);
    return copy(dst, moved);
  }
  OCTET_DISPATCH(::octet, "copy", copy, kernel_device("copy", dst, src), (dst, src));
}

#define OCTET_KERNEL(ret, name, params, args) \
  ret name params { OCTET_DISPATCH(::octet, #name, name, kernel_device(#name, OCTET_UNPAREN args), args); }
#define OCTET_CPU_KERNEL(ret, name, params, args) \
  ret name params { OCTET_DISPATCH_CPU_ONLY(::octet, #name, name, kernel_device(#name, OCTET_UNPAREN args), args); }
#define OCTET_DEFAULT(value)
#define OCTET_KERNEL_OWN_DISPATCH(ret, name, params, args)
#include "core/kernel_signatures.inc"

}  // namespace kernels
}  // namespace octet
