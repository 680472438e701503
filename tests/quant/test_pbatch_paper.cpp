// The paper scheme of PrecisionBatching (quant/pbatch.h, quant/pbatch_paper.h) against a plain
// transcription of the reference code's arithmetic (its pbatch_round_quantize with bins, centers and
// digitize; optimize_cutoff_W's thresholds and mean absolute error; decompose_weight_layers' planes;
// the CUDA kernel's FIXED conversion and bit planes), bit for bit in the integer domain: the weight
// planes, the step, the activation planes and the int64 sums; on random data of odd sizes, on every
// CPU kernel path. And the per-row weight step (both schemes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/octet.h"
#include "quant/cpu/pbatch.h"
#include "quant/pbatch.h"
#include "quant/pbatch_paper.h"
#include "tests/quant/pb_kernels.h"

namespace octet::quant {
namespace {

using cpu::PbKernel;

using testing::KernelScope;
using testing::supported_kernels;

// Normal values times `scale`, a few outliers and exact zeros.
std::vector<float> random_values(int64_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) {
    const int c = pick(gen);
    e = scale * (c == 0 ? 0.0f : (c == 1 ? 6.0f * normal(gen) : normal(gen)));
  }
  return v;
}

// ---- the reference code's arithmetic, transcribed plainly (double for numpy's float64)

struct RefRounded {
  std::vector<int64_t> rounded;  // fixed-point values on the grid
  int max_place = 0;
};

// pbatch_round_quantize(W, n): W_fixed = int(W * 2^16), the bins from the mask, their midpoints,
// np.digitize on the decreasing centers, the index capped at len(centers) - 1, times sign(W).
RefRounded ref_round_quantize(const std::vector<double>& w, int n) {
  std::vector<int64_t> fixed(w.size());
  int64_t m = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    fixed[i] = static_cast<int64_t>(w[i] * 65536.0);  // astype(int) truncates
    m = std::max<int64_t>(m, std::llabs(fixed[i]));
  }
  RefRounded out;
  if (m == 0) {
    out.max_place = 16;  // log2(0) fails: the except branch
  } else {
    out.max_place = static_cast<int>(std::ceil(std::log2(static_cast<double>(m)))) + 1;
    out.max_place = std::max(out.max_place, n);
  }
  int64_t mask = (int64_t{1} << out.max_place) - 1;
  mask = mask & ~std::max((int64_t{1} << (out.max_place - n)) - 1, int64_t{0});
  std::vector<int64_t> bins;
  for (int64_t x = 0; x < (int64_t{1} << n); ++x) bins.push_back(mask - x * (int64_t{1} << (out.max_place - n)));
  if (n == 1) bins.pop_back();  // excl_zero
  std::vector<double> centers;
  if (bins.size() == 1)
    centers.push_back(static_cast<double>(bins[0]));
  else
    for (size_t i = 0; i + 1 < bins.size(); ++i) centers.push_back((static_cast<double>(bins[i + 1] + bins[i])) / 2);
  out.rounded.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const double x = static_cast<double>(std::llabs(fixed[i]));
    // digitize, decreasing bins: i such that centers[i-1] > x >= centers[i]
    size_t idx = 0;
    while (idx < centers.size() && centers[idx] > x) ++idx;
    idx = std::min(centers.size() - 1, idx);
    const int64_t sign = w[i] > 0 ? 1 : (w[i] < 0 ? -1 : 0);
    out.rounded[i] = bins[idx] * sign;
  }
  return out;
}

double ref_error(const std::vector<double>& thresholded, const std::vector<double>& original, int n) {
  const RefRounded q = ref_round_quantize(thresholded, n);
  double s = 0.0;
  for (size_t i = 0; i < original.size(); ++i)
    s += std::fabs(static_cast<double>(q.rounded[i]) / 65536.0 - original[i]);
  return s / static_cast<double>(original.size());
}

std::vector<double> clipped(const std::vector<double>& w, double t) {
  std::vector<double> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const double sgn = w[i] > 0 ? 1.0 : (w[i] < 0 ? -1.0 : 0.0);
    out[i] = sgn * std::min(t, std::fabs(w[i]));
  }
  return out;
}

// optimize_cutoff_W: thresholds np.arange(min|W|, max|W|, max((max - min) / 100, .001)), the first
// least mean |error|; without the search, W as it is.
std::vector<double> ref_cutoff(const std::vector<double>& w, int n, bool search) {
  if (!search) return w;
  double mx = 0.0, mn = std::numeric_limits<double>::infinity();
  for (double v : w) mx = std::max(mx, std::fabs(v)), mn = std::min(mn, std::fabs(v));
  const double step = std::max((mx - mn) / 100.0, 0.001);
  const auto count = static_cast<int64_t>(std::ceil((mx - mn) / step));
  if (count < 1) return w;  // the reference fails here (argmin of nothing); octet does not clip
  const double delta = (mn + step) - mn;
  double best_t = mn, best = std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < count; ++i) {
    const double t = i == 0 ? mn : (i == 1 ? mn + step : mn + static_cast<double>(i) * delta);
    const double e = ref_error(clipped(w, t), w, n);
    if (e < best) best = e, best_t = t;
  }
  return clipped(w, best_t);
}

// decompose_weight_layers: plane x of the two's-complement rounded values for x in max_bit - n ..
// max_bit, packed here the way octet packs (bit k % 64 of word k / 64): [rows][n + 1][words].
struct RefWeights {
  std::vector<uint64_t> planes;
  std::vector<double> steps;  // per group: 2^(max_bit - n) / 2^16, the bottom plane's scale
};

RefWeights ref_weights(const std::vector<float>& w, int64_t rows, int64_t cols, int n, bool search, bool per_row) {
  RefWeights out;
  const int64_t words = pb_words(cols), P = n + 1;
  out.planes.assign(static_cast<size_t>(rows * P * words), 0);
  const int64_t groups = per_row ? rows : 1, per = per_row ? cols : rows * cols;
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<double> gw(w.begin() + g * per, w.begin() + (g + 1) * per);
    const RefRounded q = ref_round_quantize(ref_cutoff(gw, n, search), n);
    const int lo = q.max_place - n;
    out.steps.push_back(std::ldexp(1.0, lo - 16));
    for (int64_t i = 0; i < per; ++i) {
      const int64_t flat = g * per + i, r = flat / cols, k = flat % cols;
      for (int x = lo; x <= q.max_place; ++x) {
        const uint64_t bit = (static_cast<uint64_t>(q.rounded[static_cast<size_t>(i)]) >> x) & 1u;
        out.planes[static_cast<size_t>((r * P + (x - lo)) * words + k / 64)] |= bit << (k % 64);
      }
    }
  }
  return out;
}

// The CUDA kernel's activation planes: FIXED(x, act_shift) = (int)(x * act_shift) (a float multiply,
// truncation; saturated as the GPU converts), bit y of it for y < act_bits.
std::vector<uint64_t> ref_activation_planes(const std::vector<float>& x, int64_t batch, int64_t cols, int bits,
                                            int shift) {
  const int64_t words = pb_words(cols);
  std::vector<uint64_t> planes(static_cast<size_t>(batch * bits * words), 0);
  const float act_shift = static_cast<float>(int64_t{1} << shift);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t k = 0; k < cols; ++k) {
      const float v = x[static_cast<size_t>(b * cols + k)] * act_shift;
      const int32_t fixed = v >= 2147483648.0f ? INT32_MAX : (v < -2147483648.0f ? INT32_MIN : static_cast<int32_t>(v));
      for (int y = 0; y < bits; ++y) {
        const uint64_t bit = (static_cast<uint32_t>(fixed) >> y) & 1u;
        planes[static_cast<size_t>((b * bits + y) * words + k / 64)] |= bit << (k % 64);
      }
    }
  return planes;
}

// The kernel's integer sum for output (b, r): sum over weight planes i (top negative) of 2^i times
// sum over activation planes j (top negative) of 2^j popcount(W_i AND x_j).
int64_t ref_sum(const std::vector<uint64_t>& w, int64_t r, int P, const std::vector<uint64_t>& x, int64_t b, int bits,
                int64_t words) {
  int64_t total = 0;
  for (int i = 0; i < P; ++i) {
    int64_t plane = 0;
    for (int j = 0; j < bits; ++j) {
      int64_t c = 0;
      for (int64_t u = 0; u < words; ++u)
        c += __builtin_popcountll(w[static_cast<size_t>((r * P + i) * words + u)] &
                                  x[static_cast<size_t>((b * bits + j) * words + u)]);
      plane += (j == bits - 1 ? -1 : 1) * (c << j);
    }
    total += (i == P - 1 ? -1 : 1) * (plane << i);
  }
  return total;
}

std::vector<uint64_t> words_of(const Tensor& t) {
  const std::vector<int64_t> v = t.to_vector<int64_t>();
  return std::vector<uint64_t>(v.begin(), v.end());
}

PbConfig paper(int w, int a, bool clip = true, bool row = false, int shift = kPbPaperActShift) {
  PbConfig c;
  c.w_bits = w, c.a_bits = a, c.clip_search = clip, c.scheme = PbScheme::paper, c.row_step = row, c.a_shift = shift;
  return c;
}

TEST(PbPaper, WeightPlanesAndStepEqualTheReference) {
  struct Case {
    int64_t rows, cols;
    float scale;
  };
  uint32_t seed = 1;
  for (Case s : {Case{7, 37, 0.05f}, Case{3, 130, 1.0f}, Case{17, 65, 0.2f}, Case{1, 5, 3.0f}, Case{4, 9, 1e-6f}}) {
    const std::vector<float> v = random_values(s.rows * s.cols, ++seed, s.scale);
    const Tensor w = from_vector(v, {s.rows, s.cols});
    for (int n = 1; n <= kPbMaxWeightBits; ++n)
      for (bool search : {false, true})
        for (bool row : {false, true}) {
          const PbWeights pw = pb_preprocess(w, paper(n, 8, search, row));
          const RefWeights ref = ref_weights(v, s.rows, s.cols, n, search, row);
          const std::string what = "rows " + std::to_string(s.rows) + " cols " + std::to_string(s.cols) + " n " +
                                   std::to_string(n) + (search ? " clip" : "") + (row ? " per-row" : "");
          ASSERT_EQ(words_of(pw.planes), ref.planes) << what;
          if (row) {
            ASSERT_EQ(pw.row_steps.to_vector<double>(), ref.steps) << what;
          } else {
            ASSERT_FALSE(pw.row_steps.defined()) << what;
            ASSERT_EQ(pw.step, ref.steps[0]) << what;
          }
        }
  }
}

TEST(PbPaper, OneBitZeroWeightsKeepPlaneZero) {
  const Tensor w = from_vector<float>({0.5f, 0.0f, -0.25f, 0.125f, 0.0f, -1.0f}, {2, 3});
  const PbWeights pw = pb_preprocess(w, paper(1, 8, false));
  EXPECT_FALSE(pw.plane0_ones);  // codes 0 for the zeros: the 1-bit kernel path would be wrong
  EXPECT_EQ(pb_decode(pw).to_vector<int32_t>(), (std::vector<int32_t>{1, 0, -1, 1, 0, -1}));
  EXPECT_EQ(pw.step, 1.0);  // max |w| = 1: max_place 17, e = 16
  const Tensor x = from_vector<float>({0.5f, -1.0f, 1.5f}, {1, 3});
  // 0.5 * 1 + 1.5 * (-1) on the grid (x exact at 2^-6)
  EXPECT_EQ(pb_linear(pw, x, paper(1, 8)).to_vector<float>(), (std::vector<float>{-1.0f, -1.0f}));
  const PbWeights ones = pb_preprocess(from_vector<float>({0.5f, -0.1f, 0.3f}, {1, 3}), paper(1, 8, false));
  EXPECT_TRUE(ones.plane0_ones);
}

TEST(PbPaper, ActivationPlanesEqualTheReferenceAndWrap) {
  KernelScope scope;
  for (int64_t cols : {1, 37, 64, 200, 513}) {
    const int64_t batch = 3;
    std::vector<float> x = random_values(batch * cols, static_cast<uint32_t>(cols), 2.0f);
    x[0] = 3.0e9f, x[static_cast<size_t>(cols / 2)] = -7.3f;  // past int32, and past 8 bits at 2^6
    if (cols > 3) x[3] = -1.0e20f;
    const Tensor xt = from_vector(x, {batch, cols});
    for (int bits : {2, 8, 16, 32})
      for (int shift : {0, 4, 6, 12}) {
        const std::vector<uint64_t> ref = ref_activation_planes(x, batch, cols, bits, shift);
        for (PbKernel k : supported_kernels()) {
          cpu::set_pb_kernel(k);
          const PbActivations a = pb_quantize_activations(xt, paper(4, bits, true, false, shift));
          ASSERT_EQ(words_of(a.planes), ref)
              << cpu::pb_kernel_name(k) << " cols " << cols << " a" << bits << " s" << shift;
          for (double s : a.scale.to_vector<double>()) ASSERT_EQ(s, std::ldexp(1.0, -shift));
        }
        // The codes are the planes read back as a k-bit two's complement number.
        const std::vector<int32_t> codes =
            pb_activation_codes(xt, paper(4, bits, true, false, shift)).to_vector<int32_t>();
        const int64_t words = pb_words(cols);
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t k = 0; k < cols; ++k) {
            int64_t v = 0;
            for (int y = 0; y < bits; ++y) {
              const int64_t bit = (ref[static_cast<size_t>((b * bits + y) * words + k / 64)] >> (k % 64)) & 1;
              v += y == bits - 1 ? -(bit << y) : bit << y;
            }
            ASSERT_EQ(codes[static_cast<size_t>(b * cols + k)], v);
          }
      }
  }
  // -7.3 at 2^6 is -467: 8 bits keep 0x2d = 45 (the wrap), 16 bits keep -467.
  const Tensor one = from_vector<float>({-7.3f}, {1, 1});
  EXPECT_EQ(pb_activation_codes(one, paper(4, 8)).to_vector<int32_t>()[0], 45);
  EXPECT_EQ(pb_activation_codes(one, paper(4, 16)).to_vector<int32_t>()[0], -467);
}

TEST(PbPaper, NonFiniteRowsGiveNaN) {
  const Tensor x = from_vector<float>({1.0f, std::numeric_limits<float>::infinity(), 0.5f, 0.25f}, {2, 2});
  const PbWeights w = pb_preprocess(from_vector<float>({0.5f, -0.5f}, {1, 2}), paper(4, 8));
  const std::vector<float> y = pb_linear(w, x, paper(4, 8)).to_vector<float>();
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_FALSE(std::isnan(y[1]));
}

// The sums of every kernel path equal the reference's plane-by-plane sums from the reference's planes,
// and the outputs are float(double(sum) * d * 2^-shift) + bias.
TEST(PbPaper, EveryKernelGivesTheReferenceSums) {
  KernelScope scope;
  uint32_t seed = 100;
  for (int64_t cols : {7, 64, 333, 1100})
    for (int n : {1, 2, 4, 8})
      for (int bits : {8, 16, 32})
        for (bool row : {false, true}) {
          if (n == 8 && cols > 333) continue;                  // the plain reference's digitize is slow at 255 centers
          const int64_t rows = 11, batch = bits == 8 ? 9 : 3;  // 9: two batch chunks
          const std::vector<float> wv = random_values(rows * cols, ++seed, 0.1f);
          const std::vector<float> xv = random_values(batch * cols, ++seed, 1.5f);
          const Tensor w = from_vector(wv, {rows, cols}), x = from_vector(xv, {batch, cols});
          const std::vector<float> biasv = random_values(rows, ++seed, 1.0f);
          const Tensor bias = from_vector(biasv, {rows});
          const PbConfig c = paper(n, bits, true, row);
          const PbWeights pw = pb_preprocess(w, c);
          const RefWeights rw = ref_weights(wv, rows, cols, n, true, row);
          const std::vector<uint64_t> rx = ref_activation_planes(xv, batch, cols, bits, c.a_shift);
          const int64_t words = pb_words(cols);
          std::vector<float> expect(static_cast<size_t>(batch * rows));
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t s = ref_sum(rw.planes, r, n + 1, rx, b, bits, words);
              const double d = rw.steps[row ? static_cast<size_t>(r) : 0];
              expect[static_cast<size_t>(b * rows + r)] =
                  static_cast<float>(static_cast<double>(s) * (d * std::ldexp(1.0, -c.a_shift))) +
                  biasv[static_cast<size_t>(r)];
            }
          for (PbKernel k : supported_kernels()) {
            cpu::set_pb_kernel(k);
            const PbActivations a = pb_quantize_activations(x, c);
            std::vector<int64_t> acc(static_cast<size_t>(std::min<int64_t>(batch, kPbMaxBatch) * rows));
            cpu::pb_gemm(k, reinterpret_cast<const uint64_t*>(pw.planes.data<int64_t>()), rows, n + 1, words,
                         reinterpret_cast<const uint64_t*>(a.planes.data<int64_t>()), std::min(batch, kPbMaxBatch),
                         bits, acc.data());
            for (int64_t b = 0; b < std::min(batch, kPbMaxBatch); ++b)
              for (int64_t r = 0; r < rows; ++r)
                ASSERT_EQ(acc[static_cast<size_t>(b * rows + r)], ref_sum(rw.planes, r, n + 1, rx, b, bits, words))
                    << cpu::pb_kernel_name(k) << " cols " << cols << " w" << n << "a" << bits;
            ASSERT_EQ(pb_linear(pw, x, c, bias).to_vector<float>(), expect)
                << cpu::pb_kernel_name(k) << " cols " << cols << " w" << n << "a" << bits << (row ? " per-row" : "");
          }
        }
}

// The per-row step of the octet scheme: each row's codes and step are those of the row alone.
TEST(PbRowStep, OctetRowsAreQuantizedAlone) {
  const int64_t rows = 6, cols = 77;
  std::vector<float> v = random_values(rows * cols, 9, 1.0f);
  for (int64_t k = 0; k < cols; ++k) v[static_cast<size_t>(2 * cols + k)] *= 0.01f;  // a small row
  const Tensor w = from_vector(v, {rows, cols});
  for (int n : {1, 3, 4, 8}) {
    PbConfig c;
    c.w_bits = n, c.row_step = true;
    const PbWeights pw = pb_preprocess(w, c);
    const std::vector<int32_t> q = pb_decode(pw).to_vector<int32_t>();
    const std::vector<double> steps = pw.row_steps.to_vector<double>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = v.data() + r * cols;
      const double d = pb_weight_step(row, cols, n, true);
      ASSERT_EQ(steps[static_cast<size_t>(r)], d);
      std::vector<int32_t> qr(static_cast<size_t>(cols));
      pb_weight_codes(row, cols, n, d, qr.data());
      ASSERT_TRUE(std::equal(qr.begin(), qr.end(), q.begin() + r * cols)) << "row " << r << " w" << n;
    }
    EXPECT_EQ(pw.step, *std::max_element(steps.begin(), steps.end()));
    // pb_linear against the float64 reference of the same codes and steps.
    const Tensor x = from_vector(random_values(3 * cols, 4, 1.0f), {3, cols});
    const std::vector<float> y = pb_linear(pw, x, c).to_vector<float>();
    const std::vector<double> ref = pb_linear_reference(pw, x, c).to_vector<double>();
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-5 * (1.0 + std::fabs(ref[i])));
  }
}

// A row of small weights keeps its precision with a per-row step: its error falls.
TEST(PbRowStep, LowersTheErrorOfUnevenRows) {
  const int64_t rows = 8, cols = 256;
  std::vector<float> v = random_values(rows * cols, 21, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) v[static_cast<size_t>(r * cols + k)] *= std::ldexp(1.0f, -static_cast<int>(r));
  const Tensor w = from_vector(v, {rows, cols});
  for (PbScheme scheme : {PbScheme::octet, PbScheme::paper}) {
    auto error = [&](bool row) {
      PbConfig c;
      c.w_bits = 4, c.scheme = scheme, c.row_step = row;
      const PbWeights pw = pb_preprocess(w, c);
      const std::vector<int32_t> q = pb_decode(pw).to_vector<int32_t>();
      const std::vector<double> steps = row ? pw.row_steps.to_vector<double>() : std::vector<double>(rows, pw.step);
      double e = 0.0;
      for (size_t i = 0; i < v.size(); ++i) {
        const double d = steps[i / static_cast<size_t>(cols)] * q[i] - v[i];
        e += d * d;
      }
      return e;
    };
    EXPECT_LT(error(true), 0.5 * error(false)) << pb_scheme_name(scheme);
  }
}

TEST(PbPaper, ConfigNamesAndErrors) {
  EXPECT_EQ(pb_config_name(paper(4, 8)), "w4a8-paper");
  EXPECT_EQ(pb_config_name(paper(4, 8, true, true, 4)), "w4a8-paper-s4-row");
  PbConfig c;
  c.row_step = true;
  EXPECT_EQ(pb_config_name(c), "w4a16-row");
  EXPECT_THROW(check_pb_config(paper(4, 8, true, false, 31), "layer"), Error);
  EXPECT_THROW(pb_preprocess(from_vector<float>({2.0e6f}, {1, 1}), paper(4, 8)), Error);
}

}  // namespace
}  // namespace octet::quant
