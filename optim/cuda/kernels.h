// The CUDA versions of optim/'s kernels: the list of optim/kernel_signatures.inc, which
// optim/kernels.h dispatches to, with the tensors' device current (defined and instantiated in
// optim/cuda/device_update.cpp, which launches the kernels of optim/cuda/update.h). Built with
// OCTET_CUDA only. Pure C++ declarations: no CUDA headers here.
#pragma once

#include "optim/kernels.h"

namespace octet::optim::cuda {
#include "optim/kernel_signatures.inc"  // IWYU pragma: export
}  // namespace octet::optim::cuda
