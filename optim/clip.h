// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_.
//   loss.backward();
//   double norm = clip_grad_norm(params, 1.0);   // grads now have total norm <= ~1.0
//   opt.step();
#pragma once

#include <vector>

#include "core/tensor.h"

namespace octet {

// Returns the L2 norm of all the params' gradients together (accumulated in double; params
// without a grad are skipped; 0 when none has one). When max_norm / (total + 1e-6) < 1, every
// grad is scaled in place by that factor (PyTorch's test, which also scales by a hair when total
// is within 1e-6 below max_norm). A non-finite total (inf/nan somewhere) is returned and the
// grads are left untouched: PyTorch would scale them by nan/0; callers should skip that step.
// CUDA gradients are reduced on their GPU (a fixed-order sum, so the norm is reproducible; one
// host synchronization per device to read it) and scaled there.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace octet
