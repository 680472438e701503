// The CUDA versions of quant/'s tensor-level kernels: the list of quant/kernel_signatures.inc
// without its CPU-only entries, which quant/kernels.h dispatches to, with the tensors' device
// current. Built with OCTET_CUDA only. Pure C++ declarations: no CUDA headers here.
#pragma once

#include "quant/kernels.h"

namespace octet::quant::cuda {
#define OCTET_CPU_KERNEL(ret, name, params, args)  // CPU-only: no CUDA version
#include "quant/kernel_signatures.inc"
}  // namespace octet::quant::cuda
