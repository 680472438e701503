// The CPU versions of quant/'s tensor-level kernels: the list of quant/kernel_signatures.inc,
// which quant/kernels.h dispatches to. They run the loops of quant/cpu/*.h on host tensors.
#pragma once

#include "quant/kernels.h"

namespace octet::quant::cpu {
#include "quant/kernel_signatures.inc"
}  // namespace octet::quant::cpu
