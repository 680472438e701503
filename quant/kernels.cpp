// quant/'s dispatch point: the functions of octet::quant::dispatch, one per entry of
// quant/kernel_signatures.inc, written by the list itself (core/kernel_dispatch.h): each runs the
// CPU's or the CUDA's version by the device of its tensors, with that device current.
#include "quant/kernels.h"

#include "core/cuda.h"
#include "core/error.h"
#include "core/kernel_dispatch.h"
#include "quant/cpu/kernels.h"
#include "quant/cuda/kernels.h"

namespace octet::quant {

void check_kernel_device(Device d, const char* op, const char* family) {
  if (cuda_compiled()) {
    OCTET_CHECK(d.is_cpu() || d.is_cuda(), op, ": no ", family, " kernels for device ", d);
  } else {
    OCTET_CHECK(d.is_cpu(), op, ": no ", family, " kernels for device ", d, " in this build (CPU only)");
  }
}

// PrecisionBatching's product runs where its weight planes are (its bias may be undefined).
inline const Tensor* dispatch_tensor(const PbWeights& w) { return &w.planes; }

namespace dispatch {

#define OCTET_KERNEL(ret, name, params, args)                                                                        \
  ret name params {                                                                                                  \
    OCTET_DISPATCH(::octet::quant, "quant::" #name, name, kernel_device("quant::" #name, OCTET_UNPAREN args), args); \
  }
#define OCTET_CPU_KERNEL(ret, name, params, args)                                                                      \
  ret name params {                                                                                                    \
    OCTET_DISPATCH_CPU_ONLY(::octet::quant, "quant::" #name, name, kernel_device("quant::" #name, OCTET_UNPAREN args), \
                            args);                                                                                     \
  }
#define OCTET_DEFAULT(value)
#include "quant/kernel_signatures.inc"

bool supported(Kernel kernel, Device d) {
  switch (kernel) {
#define OCTET_KERNEL(ret, name, params, args) \
  case Kernel::name:                          \
    return d.is_cpu() || (d.is_cuda() && cuda_compiled());
#define OCTET_CPU_KERNEL(ret, name, params, args) \
  case Kernel::name:                              \
    return d.is_cpu();
#include "quant/kernel_signatures.inc"
  }
  return false;
}

}  // namespace dispatch
}  // namespace octet::quant
