// Softmax family and losses, forward and backward.
//   Tensor p = softmax(logits, -1);
//   Tensor l = cross_entropy(logits, target, CrossEntropyOptions().label_smoothing(0.1));
#pragma once

#include "core/tensor.h"

namespace octet {

enum class Reduction { none, mean, sum };

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

struct CrossEntropyOptions {
  int64_t ignore_index_ = -100;
  double label_smoothing_ = 0.0;
  Reduction reduction_ = Reduction::mean;
  CrossEntropyOptions& ignore_index(int64_t v) {
    ignore_index_ = v;
    return *this;
  }
  CrossEntropyOptions& label_smoothing(double v) {
    label_smoothing_ = v;
    return *this;
  }
  CrossEntropyOptions& reduction(Reduction r) {
    reduction_ = r;
    return *this;
  }
};

// logp [N, C] (log-probabilities), target i64 [N] with values in [0, C) or ignore_index.
// Mean reduction divides by the number of targets that are not ignored (as PyTorch does).
Tensor nll_loss(const Tensor& logp, const Tensor& target, int64_t ignore_index = -100,
                Reduction reduction = Reduction::mean);
// logits [N, C], target i64 [N]; label smoothing mixes in the uniform distribution over C.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace octet
