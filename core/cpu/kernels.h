// CPU implementations of core/'s kernel list (core/kernel_signatures.inc, the same signatures as
// core/kernels.h), reached through the device dispatch in core/kernels.cpp.
#pragma once

#include "core/kernels.h"

namespace octet::cpu {

using kernels::AttentionGeometry;
using kernels::Conv2dGeometry;
using kernels::Pool2dGeometry;

#include "core/kernel_signatures.inc"  // IWYU pragma: export

}  // namespace octet::cpu
