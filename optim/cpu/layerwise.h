// CPU reductions for the norms of whole parameters (LAMB, LARS, clip_grad_norm; optim/cpu/update.cpp;
// the factors made of them, lamb_ratio() and lars_local_lr(), are in optim/update_rules.h; the CUDA
// reductions, which take the same sums, in optim/cuda/). A sum is taken in units of kSumUnit
// elements counted from the parameter's first: each unit's terms added in double in a fixed order,
// the units' sums added exactly (ExactSum). So a norm depends on neither the thread count nor on
// how the parameter was split, as long as each piece starts on a unit: a shard of sharded optimizer
// state (Optimizer::shard_state) starts on a block of at least 64 elements, and its ranks' sums
// added together are the unsharded sum, bit for bit.
//   UnitSums<2> sums;
//   state.read_blocks(BlockRead<T>([&](const StateBlock<const T>& b) { sums.add_block(b.n, term_of_b); }));
//   LayerSums s = sums.take();
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>

#include "core/exact_sum.h"
#include "core/parallel.h"
#include "optim/update_rules.h"

namespace octet {

// K exact sums filled from blocks that may report from several threads. A block starts on a unit
// (its begin is a multiple of kSumUnit); term(i, t) writes the K terms of the block's element i.
template <size_t K>
class UnitSums {
 public:
  template <typename Term>
  void add_block(int64_t n, const Term& term) {
    std::array<ExactSum, K> local;
    for (int64_t u = 0; u < n; u += kSumUnit) {
      std::array<double, K> unit{};
      for (int64_t i = u, end = std::min(n, u + kSumUnit); i < end; ++i) {
        double t[K];
        term(i, t);
        for (size_t k = 0; k < K; ++k) unit[k] += t[k];
      }
      for (size_t k = 0; k < K; ++k) local[k].add(unit[k]);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t k = 0; k < K; ++k) sums_[k].merge(local[k]);
  }
  std::array<ExactSum, K> take() { return sums_; }

 private:
  std::mutex mu_;
  std::array<ExactSum, K> sums_;
};

// The exact sum of x[i]^2 over n elements (x starts on a unit), in parallel over fixed blocks of
// units; with finite_only, non-finite elements add nothing (a gradient's, see finite_square).
template <typename T>
ExactSum exact_squares(const T* x, int64_t n, bool finite_only = false) {
  constexpr int64_t kBlock = kSumUnit * 512;
  UnitSums<1> sums;
  parallel_for(0, (n + kBlock - 1) / kBlock, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      const T* b = x + k * kBlock;
      sums.add_block(std::min(kBlock, n - k * kBlock), [&](int64_t i, double* t) {
        t[0] = finite_only ? finite_square(b[i]) : static_cast<double>(b[i]) * static_cast<double>(b[i]);
      });
    }
  });
  return sums.take()[0];
}

}  // namespace octet
