// Joining tensors, forward and backward: cat along an existing dim, stack along a new one.
//   Tensor y = cat({a, b}, 1);       // [N, 3] and [N, 5] -> [N, 8]
//   Tensor s = stack({a, a}, 0);     // [N, 3] twice -> [2, N, 3]
#pragma once

#include <vector>

#include "core/tensor.h"

namespace octet {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

}  // namespace octet
