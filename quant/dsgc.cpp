// DSGC (quant/dsgc.h): cosine distance of a quantization and the grid + golden-section clip search.
#include "quant/dsgc.h"

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "quant/cpu/int8_quant.h"

namespace octet::quant {

namespace {

const float* f32_data(const Tensor& g, Tensor& keep, const char* op) {
  OCTET_CHECK(g.defined(), op, ": expected a defined tensor");
  OCTET_CHECK(g.dtype() == DType::f32, op, ": expected dtype f32, got ", g.dtype());
  OCTET_CHECK(g.device().is_cpu(), op, ": no INT8 kernels for device ", g.device(), " yet (CPU only)");
  keep = g.detach().contiguous();
  return keep.data<float>();
}

// (sqrt(5) - 1) / 2: the bracket keeps this fraction per golden-section step.
constexpr double kGolden = 0.6180339887498949;

}  // namespace

double cosine_distance(const float* g, int64_t n, float clip, Int8Rounding rounding, uint64_t seed) {
  OCTET_CHECK(!(clip < 0.0f), "cosine_distance: expected a clip >= 0, got ", clip);
  // A non-finite clip dequantizes every code to NaN (0 * inf or x * NaN).
  if (!std::isfinite(clip)) return std::numeric_limits<double>::quiet_NaN();
  const float inv = int8_inv_scale(clip);
  if (rounding == Int8Rounding::nearest) return cpu::cosine_distance(cpu::cosine_sums_nearest(g, n, inv));
  std::vector<int8_t> codes(static_cast<size_t>(n));
  cpu::CosineSums sums;
  cpu::quantize_transposed(g, 1, 1, n, inv, rounding, seed, codes.data(), &sums);
  return cpu::cosine_distance(sums);
}

double cosine_distance(const Tensor& g, float clip, Int8Rounding rounding, uint64_t seed) {
  Tensor keep;
  const float* p = f32_data(g, keep, "cosine_distance");
  return cosine_distance(p, keep.numel(), clip, rounding, seed);
}

DsgcResult dsgc_search(const float* g, int64_t n, const DsgcOptions& o) {
  OCTET_CHECK(o.grid_points >= 1 && o.golden_iterations >= 0,
              "dsgc_search: expected grid_points >= 1 and "
              "golden_iterations >= 0, got ",
              o.grid_points, " and ", o.golden_iterations);
  DsgcResult best;
  const float max_abs = cpu::absmax(g, n);
  if (max_abs == 0.0f) return best;  // all zeros: quantized exactly with any clip
  if (!std::isfinite(max_abs)) {
    best.clip = max_abs;
    best.cos_distance = std::numeric_limits<double>::quiet_NaN();
    return best;
  }
  auto eval = [&](double c) {
    const auto clip = static_cast<float>(c);
    const double d = cpu::cosine_distance(cpu::cosine_sums_nearest(g, n, int8_inv_scale(clip)));
    ++best.evaluations;
    if (best.evaluations == 1 || d < best.cos_distance) best.clip = clip, best.cos_distance = d;
    return d;
  };
  // Coarse grid, ascending.
  const auto grid = static_cast<double>(o.grid_points);
  int64_t best_j = 1;
  double best_d = std::numeric_limits<double>::infinity();
  for (int64_t j = 1; j <= o.grid_points; ++j) {
    const double d = eval(max_abs * static_cast<double>(j) / grid);
    if (d < best_d) best_d = d, best_j = j;
  }
  // Golden-section search inside [c_{j-1}, c_{j+1}] (c_0 = 0 and c_{G+1} = max|g| excluded).
  double lo = max_abs * static_cast<double>(best_j - 1) / grid;
  double hi = best_j == o.grid_points ? max_abs : max_abs * static_cast<double>(best_j + 1) / grid;
  if (o.golden_iterations == 0) return best;
  double x1 = hi - kGolden * (hi - lo), x2 = lo + kGolden * (hi - lo);
  double f1 = eval(x1), f2 = eval(x2);
  for (int64_t it = 0; it < o.golden_iterations; ++it) {
    if (f1 <= f2) {
      hi = x2, x2 = x1, f2 = f1;
      x1 = hi - kGolden * (hi - lo);
      f1 = eval(x1);
    } else {
      lo = x1, x1 = x2, f1 = f2;
      x2 = lo + kGolden * (hi - lo);
      f2 = eval(x2);
    }
  }
  return best;
}

DsgcResult dsgc_search(const Tensor& g, const DsgcOptions& options) {
  Tensor keep;
  const float* p = f32_data(g, keep, "dsgc_search");
  return dsgc_search(p, keep.numel(), options);
}

}  // namespace octet::quant
