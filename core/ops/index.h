// Indexing ops, forward and backward: gather along a dim and embedding (rows picked by ids).
//   Tensor e = embedding(weight, ids);            // weight [V, D], ids [B, T] -> [B, T, D]
//   Tensor p = gather(log_probs, 1, targets);     // targets [N, 1] -> [N, 1]
#pragma once

#include "core/tensor.h"

namespace octet {

// out[i][j] = x[i][index[i][j]] along `dim` (index i64, same rank; other dims equal to x's).
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// Rows of weight [V, D] picked by ids (i64, any shape) -> [..., D]. Rows equal to padding_idx
// (if >= 0) get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);

}  // namespace octet
