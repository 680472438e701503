// DSGC (quant/dsgc.h): cosine distance of a quantization and the grid + golden-section clip search,
// the same search points on every device: the search runs on the host and asks the device kernels
// (quant/kernels.h: the CPU loops of quant/cpu/int8_quant.h, or the CUDA kernels, which evaluate
// up to eight clips per pass over g) for d_c at a batch of clips. The host-pointer entry points run
// the tensor ones on a CPU tensor over the caller's floats (no copy): the same CPU kernels.
#include "quant/dsgc.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/storage.h"
#include "quant/kernels.h"

namespace octet::quant {

namespace {

// (sqrt(5) - 1) / 2: the bracket keeps this fraction per golden-section step.
constexpr double kGolden = 0.6180339887498949;

// d_c (round-to-nearest) at each clip of a batch, in order.
using Evaluate = std::function<std::vector<double>(const std::vector<float>& clips)>;

void check_options(const DsgcOptions& o) {
  OCTET_CHECK(o.grid_points >= 1 && o.golden_iterations >= 0,
              "dsgc_search: expected grid_points >= 1 and golden_iterations >= 0, got ", o.grid_points, " and ",
              o.golden_iterations);
}

// The search of quant/dsgc.h given max|g| and an evaluator.
DsgcResult search(float max_abs, const DsgcOptions& o, const Evaluate& evaluate) {
  DsgcResult best;
  if (max_abs == 0.0f) return best;  // all zeros: quantized exactly with any clip
  if (!std::isfinite(max_abs)) {
    best.clip = max_abs;
    best.cos_distance = std::numeric_limits<double>::quiet_NaN();
    return best;
  }
  // Evaluates a batch; keeps the best point in evaluation order (the first of equals).
  auto eval = [&](const std::vector<double>& points) {
    std::vector<float> clips;
    for (double c : points) clips.push_back(static_cast<float>(c));
    const std::vector<double> d = evaluate(clips);
    for (size_t i = 0; i < clips.size(); ++i) {
      ++best.evaluations;
      if (best.evaluations == 1 || d[i] < best.cos_distance) best.clip = clips[i], best.cos_distance = d[i];
    }
    return d;
  };
  // Coarse grid, ascending, in one batch.
  const auto grid = static_cast<double>(o.grid_points);
  std::vector<double> points;
  for (int64_t j = 1; j <= o.grid_points; ++j) points.push_back(max_abs * static_cast<double>(j) / grid);
  const std::vector<double> dg = eval(points);
  int64_t best_j = 1;
  double best_d = std::numeric_limits<double>::infinity();
  for (int64_t j = 1; j <= o.grid_points; ++j)
    if (dg[static_cast<size_t>(j - 1)] < best_d) best_d = dg[static_cast<size_t>(j - 1)], best_j = j;
  // Golden-section search inside [c_{j-1}, c_{j+1}] (c_0 = 0 and c_{G+1} = max|g| excluded).
  double lo = max_abs * static_cast<double>(best_j - 1) / grid;
  double hi = best_j == o.grid_points ? max_abs : max_abs * static_cast<double>(best_j + 1) / grid;
  if (o.golden_iterations == 0) return best;
  double x1 = hi - kGolden * (hi - lo), x2 = lo + kGolden * (hi - lo);
  const std::vector<double> d12 = eval({x1, x2});
  double f1 = d12[0], f2 = d12[1];
  for (int64_t it = 0; it < o.golden_iterations; ++it) {
    if (f1 <= f2) {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - kGolden * (hi - lo);
      f1 = eval({x1})[0];
    } else {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + kGolden * (hi - lo);
      f2 = eval({x2})[0];
    }
  }
  return best;
}

// A CPU tensor [n] over the caller's floats, without a copy (the kernels only read it).
Tensor host_floats(const float* g, int64_t n) {
  OCTET_CHECK(n >= 0, "dsgc: expected n >= 0, got ", n);
  auto storage = Storage::wrap(const_cast<float*>(g), static_cast<size_t>(n) * sizeof(float), Device::cpu(), nullptr);
  return from_storage(std::move(storage), {n}, DType::f32);
}

}  // namespace

double cosine_distance(const CosineSums& s) {
  if (!s.finite) return std::numeric_limits<double>::quiet_NaN();
  if (s.gg == 0.0) return 0.0;
  if (s.qq == 0.0) return 1.0;
  const double d = 1.0 - s.gq / (std::sqrt(s.gg) * std::sqrt(s.qq));
  return std::clamp(d, 0.0, 2.0);
}

double cosine_distance(const float* g, int64_t n, float clip, Int8Rounding rounding, uint64_t seed) {
  OCTET_CHECK(!(clip < 0.0f), "cosine_distance: expected a clip >= 0, got ", clip);
  return cosine_distance(host_floats(g, n), clip, rounding, seed);
}

double cosine_distance(const Tensor& g, float clip, Int8Rounding rounding, uint64_t seed) {
  const Tensor c = int8_f32_operand(g, "cosine_distance");
  OCTET_CHECK(!(clip < 0.0f), "cosine_distance: expected a clip >= 0, got ", clip);
  // A non-finite clip dequantizes every code to NaN (0 * inf or x * NaN).
  if (!std::isfinite(clip)) return std::numeric_limits<double>::quiet_NaN();
  return cosine_distance(dispatch::rounded_sums(c, int8_inv_scale(clip), rounding, seed));
}

DsgcResult dsgc_search(const float* g, int64_t n, const DsgcOptions& options) {
  check_options(options);
  return dsgc_search(host_floats(g, n), options);
}

DsgcResult dsgc_search(const Tensor& g, const DsgcOptions& options) {
  const Tensor c = int8_f32_operand(g, "dsgc_search");
  check_options(options);
  return search(dispatch::absmax_of(c), options, [&](const std::vector<float>& clips) {
    std::vector<float> invs;
    for (float clip : clips) invs.push_back(int8_inv_scale(clip));
    std::vector<double> d;
    for (const CosineSums& s : dispatch::nearest_sums(c, invs)) d.push_back(cosine_distance(s));
    return d;
  });
}

}  // namespace octet::quant
