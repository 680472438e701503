// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_.
//   loss.backward();
//   double norm = clip_grad_norm(params, 1.0);   // grads now have total norm <= ~1.0
//   opt.step();
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace octet {

class Optimizer;

// Returns the L2 norm of all the params' gradients together (params without a grad are skipped; 0
// when none has one). When max_norm / (total + 1e-6) < 1, every grad is scaled in place by that
// factor (PyTorch's test, which also scales by a hair when total is within 1e-6 below max_norm). A
// non-finite total (inf/nan somewhere) is returned and the grads are left untouched: PyTorch would
// scale them by nan/0; callers should skip that step. CPU gradients' squares are summed exactly
// (ExactSum over units, optim/cpu/layerwise.h), so the norm depends on neither the thread count
// nor the order of the params; CUDA gradients are reduced on their GPU (a fixed-order sum, so the
// norm is reproducible; one host synchronization per device to read it) and scaled there.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The same over the optimizer's parameters. With sharded state (Optimizer::shard_state) each rank
// sums its ranges of the gradients and the sums are added over the ranks: every rank gets the norm
// one process gets, bit for bit on the CPU, and scales its ranges, the only part of each gradient
// the sharded step reads. Every rank calls it together.
double clip_grad_norm(const Optimizer& optimizer, double max_norm);

// Each of the optimizer's parameters that has a gradient, with its gradient's L2 norm (sharded: its
// ranks' sums added, every rank calling together), in the optimizer's order.
std::vector<std::pair<std::string, double>> grad_norms(const Optimizer& optimizer);

}  // namespace octet
