// The CUDA versions of quant/'s tensor-level kernels (the list in quant/kernel_signatures.inc;
// quant/kernels.h dispatches to them, with the tensors' device current). Built with OCTET_CUDA
// only. Pure C++ declarations: no CUDA headers here.
#pragma once

#include "quant/kernels.h"

namespace octet::quant::cuda {
#include "quant/kernel_signatures.inc"
}  // namespace octet::quant::cuda
