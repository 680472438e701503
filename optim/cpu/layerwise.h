// CPU reductions for layer-wise optimizers (LAMB, LARS; optim/cpu/update.cpp): norms of a whole
// parameter, computed in a first pass over blocks and applied in a second (the factors made of
// them, lamb_ratio() and lars_local_lr(), are in optim/update_rules.h; the CUDA reductions in
// optim/cuda/). Sums are taken in double whatever the parameter's type, one partial per block, and
// added in block order, so a norm depends on the state's blocks but never on the thread count or on
// which thread ran which block.
//   BlockSums<2> sums;
//   state.read_blocks(BlockRead<T>([&](const StateBlock<const T>& b) { sums.add(b.begin, {sp, su}); }));
//   auto [p_sq, u_sq] = sums.total();
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "optim/update_rules.h"

namespace octet {

// Partial sums of N quantities, one per block (blocks may report from several threads).
template <size_t N>
class BlockSums {
 public:
  using Sums = std::array<double, N>;
  void add(int64_t begin, const Sums& partial) {
    std::lock_guard<std::mutex> lock(mu_);
    parts_.emplace_back(begin, partial);
  }
  Sums total() {
    std::sort(parts_.begin(), parts_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    Sums out{};
    for (const auto& [begin, part] : parts_)
      for (size_t i = 0; i < N; ++i) out[i] += part[i];
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<int64_t, Sums>> parts_;
};

// sum of x[i]^2 over n elements, in fixed chunks (parallel, thread-count independent); with
// finite_only, non-finite elements add nothing (a gradient's, see finite_grad).
template <typename T>
double sum_squares(const T* x, int64_t n, bool finite_only = false) {
  constexpr int64_t kChunk = int64_t{1} << 15;
  std::vector<double> part(static_cast<size_t>((n + kChunk - 1) / kChunk), 0.0);
  parallel_for(0, static_cast<int64_t>(part.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      double s = 0.0;
      for (int64_t i = k * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
        s += finite_only ? finite_square(x[i]) : static_cast<double>(x[i]) * static_cast<double>(x[i]);
      part[static_cast<size_t>(k)] = s;
    }
  });
  double total = 0.0;
  for (double s : part) total += s;
  return total;
}

}  // namespace octet
