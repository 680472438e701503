// Joining tensors, forward and backward: cat along an existing dim, stack along a new one; and
// split, cat's inverse (torch.split with a size).
//   Tensor y = cat({a, b}, 1);       // [N, 3] and [N, 5] -> [N, 8]
//   Tensor s = stack({a, a}, 0);     // [N, 3] twice -> [2, N, 3]
//   auto qkv = split(x, c, 2);       // [B, T, 3C] -> three [B, T, C] views
#pragma once

#include <vector>

#include "core/tensor.h"

namespace octet {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// Views of x's consecutive pieces of `size` along dim (the last may be shorter). One autograd node
// for all of them: the backward writes each piece's gradient into one tensor of x's shape (a piece
// without one gives zeros), where a narrow per piece would make a zero tensor of x's shape each and
// add them up.
std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim);

}  // namespace octet
