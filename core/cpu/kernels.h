// CPU implementations of the kernels declared in core/kernels.h (same signatures), reached
// through the device dispatch in core/kernels.cpp.
#pragma once

#include "core/kernels.h"

namespace octet::cpu {

#include "core/kernel_signatures.inc"  // IWYU pragma: export

}  // namespace octet::cpu
