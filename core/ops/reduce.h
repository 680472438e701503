// Reductions over dims, forward and backward. An empty dim list reduces over every dim.
//   Tensor s = sum(x, {0, 2}, /*keepdim=*/true);   auto [v, i] = max(x, 1);   Tensor n = norm(x);
#pragma once

#include <vector>

#include "core/tensor.h"

namespace octet {

struct ValuesIndices {
  Tensor values;
  Tensor indices;  // i64
};

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Variance with Bessel's `correction` (1 = unbiased, as PyTorch's default).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
// p-norm (p > 0, or INFINITY for the max norm); the gradient at a zero norm is zero.
Tensor norm(const Tensor& x, double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// Max / min over all elements (gradient goes to the first extreme element).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// Max / min along one dim with the index of the first extreme element.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

}  // namespace octet
