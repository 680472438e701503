// Timing helper shared by the benchmark programs.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>

namespace octet::bench {

// Best-of-`reps` wall time of fn in seconds, after one warm-up call.
inline double best_time(int reps, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace octet::bench
