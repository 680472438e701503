// The reference code's weight grid and clip search (quant/pbatch_paper.h).
#include "quant/pbatch_paper.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "core/parallel.h"

namespace octet::quant {

int pb_paper_exponent(int64_t max_fixed, int bits) {
  // log2 of 0 fails in the reference, which then takes 16 (and skips the max with n).
  if (max_fixed <= 0) return 16 - bits;
  // ceil(log2(m)) is the bit width of m - 1 (exact where the reference's float log2 is, m < 2^36).
  const int max_place = std::max(static_cast<int>(std::bit_width(static_cast<uint64_t>(max_fixed - 1))) + 1, bits);
  return max_place - bits;
}

namespace {

// The grid for a given clip t: e from the largest clipped fixed-point magnitude.
PbPaperGrid grid_at(float absmax, double clip, int bits) {
  PbPaperGrid g;
  g.clip = clip;
  g.exponent = pb_paper_exponent(pb_paper_fixed(absmax, clip), bits);
  return g;
}

// mean |w - q d| over the original weights, summed in order.
double mean_abs_error(const float* w, int64_t n, const PbPaperGrid& g, int bits) {
  const double d = g.step();
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i)
    s += std::fabs(static_cast<double>(pb_paper_code(w[i], g, bits)) * d - static_cast<double>(w[i]));
  return s / static_cast<double>(n);
}

}  // namespace

PbPaperGrid pb_paper_grid(const float* w, int64_t n, int bits, bool clip_search) {
  float mx = 0.0f, mn = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(w[i]);
    mx = std::max(mx, a);
    mn = std::min(mn, a);
  }
  if (n == 0) return grid_at(0.0f, std::numeric_limits<double>::infinity(), bits);
  const double lo = mn, hi = mx;
  const double stride = std::max((hi - lo) / 100.0, 0.001);
  const double count = std::ceil((hi - lo) / stride);
  if (!clip_search || !(count >= 1.0)) return grid_at(mx, std::numeric_limits<double>::infinity(), bits);
  const int64_t candidates = static_cast<int64_t>(count);
  const double delta = (lo + stride) - lo;
  auto candidate = [&](int64_t i) { return i == 0 ? lo : i == 1 ? lo + stride : lo + static_cast<double>(i) * delta; };
  std::vector<double> err(static_cast<size_t>(candidates));
  // Each candidate's error is one ordered sum: the same for any thread count.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, n));
  parallel_for(0, candidates, grain, [&](int64_t c0, int64_t c1) {
    for (int64_t i = c0; i < c1; ++i) {
      err[static_cast<size_t>(i)] = mean_abs_error(w, n, grid_at(mx, candidate(i), bits), bits);
    }
  });
  const int64_t best = std::min_element(err.begin(), err.end()) - err.begin();  // the first least
  return grid_at(mx, candidate(best), bits);
}

}  // namespace octet::quant
