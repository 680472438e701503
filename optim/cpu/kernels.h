// The CPU versions of optim/'s kernels: the list of optim/kernel_signatures.inc, which
// optim/kernels.h dispatches to (defined and instantiated in optim/cpu/update.cpp). They run the
// rule loops of optim/cpu/rule_loop.h over the blocks of a parameter's state.
#pragma once

#include "optim/kernels.h"

namespace octet::optim::cpu {
#include "optim/kernel_signatures.inc"  // IWYU pragma: export
}  // namespace octet::optim::cpu
