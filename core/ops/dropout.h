// Dropout, and the guard that makes it shard a global batch's mask across data-parallel processes.
//   Tensor y = dropout(x, 0.1, /*training=*/true);
//   DropoutShardGuard g({rank, world});   // while training under several processes
#pragma once

#include "core/tensor.h"

namespace octet {

class Generator;

// Zeroes elements with probability p and scales the rest by 1/(1-p) while training. x's batch
// runs along `batch_dim` (1 for time-major sequences [T, B, ...]).
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr, int64_t batch_dim = 0);

// Data-parallel training: this process holds block `rank` of `count` equal blocks of each global
// batch. While one is set (DropoutShardGuard; the trainer sets it under several processes), dropout
// draws the mask of the whole global batch and keeps this process's block, so every example gets
// the mask one process would give it and the ranks' masks differ. Every rank draws the same
// numbers, so the generators stay alike and a run follows the one-process run, dropout on.
struct DropoutShard {
  int rank = 0, count = 1;
};
DropoutShard dropout_shard();
class DropoutShardGuard {
 public:
  explicit DropoutShardGuard(DropoutShard s);
  ~DropoutShardGuard();
  DropoutShardGuard(const DropoutShardGuard&) = delete;
  DropoutShardGuard& operator=(const DropoutShardGuard&) = delete;

 private:
  DropoutShard previous_;
};

}  // namespace octet
