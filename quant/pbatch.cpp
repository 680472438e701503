// PrecisionBatching (quant/pbatch.h): the weight preprocessing (step, clip search, codes, bit-planes),
// the argument checks, then the device kernels through quant/kernels.h (quant/cpu/pbatch.h or
// quant/cuda/pbatch.h), and the float64 reference the tests compare with.
#include "quant/pbatch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "core/parallel.h"
#include "quant/cpu/pbatch.h"
#include "quant/cpu/pbatch_kernels.h"
#include "quant/kernels.h"
#include "quant/pbatch_paper.h"

namespace octet::quant {

namespace {

void check_weight_bits(int bits, const char* op) {
  OCTET_CHECK(bits >= 1 && bits <= kPbMaxWeightBits, op, ": expected weight bits in [1, ", kPbMaxWeightBits, "], got ",
              bits);
}

void check_activation_bits(int bits, const char* op) {
  OCTET_CHECK(bits >= kPbMinActivationBits && bits <= kPbMaxActivationBits, op, ": expected activation bits in [",
              kPbMinActivationBits, ", ", kPbMaxActivationBits, "], got ", bits);
}

void check_device(Device d, const char* op) { check_kernel_device(d, op, "PrecisionBatching"); }

// x f32 [batch, cols] with cols < kPbMaxCols, contiguous, on the device it came on.
Tensor activation_operand(const Tensor& x, const char* op) {
  OCTET_CHECK(x.defined(), op, ": expected a defined input");
  OCTET_CHECK(x.dtype() == DType::f32, op, ": expected input dtype f32, got ", x.dtype());
  OCTET_CHECK(x.dim() == 2, op, ": expected a 2-D input [batch, cols], got ", x.shape());
  OCTET_CHECK(x.size(1) < kPbMaxCols, op, ": expected fewer than ", kPbMaxCols, " columns, got ", x.size(1));
  check_device(x.device(), op);
  return x.detach().contiguous();
}

// Half the number of levels: codes lie in [-half, half] (n >= 2); 1 for n == 1, where d = c.
double half_levels(int bits) { return bits == 1 ? 1.0 : std::ldexp(1.0, bits - 1); }

// max |w| over the finite weights; an Error naming the first non-finite one.
float weight_absmax(const float* w, int64_t n, const char* op) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(w[i]);
    OCTET_CHECK(a <= std::numeric_limits<float>::max(), op, ": non-finite weight ", w[i], " at flat index ", i);
    m = a > m ? a : m;
  }
  return m;
}

OCTET_SIMD_INLINE double code_of(float w, int bits, double step, double half) {
  if (bits == 1) return w >= 0.0f ? 1.0 : -1.0;
  return cpu::detail::pb_round_clamped(static_cast<double>(w) / step, half);
}

// sum (w - d q)^2 over n weights, in 8 interleaved partial sums added in a fixed order: the same
// double on every ISA (simd_dispatch vectorizes the 8 lanes).
double squared_error(const float* w, int64_t n, int bits, double step) {
  return octet::cpu::simd_dispatch([=] {
    const double half = half_levels(bits);
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int l = 0; l < 8; ++l) {
        const double e = static_cast<double>(w[i + l]) - step * code_of(w[i + l], bits, step, half);
        s[l] += e * e;
      }
    }
    for (int l = 0; i < n; ++i, ++l) {
      const double e = static_cast<double>(w[i]) - step * code_of(w[i], bits, step, half);
      s[l] += e * e;
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  });
}

// Candidate i's step (i = 1..kPbClipCandidates): c_i = max|W| * i / kPbClipCandidates, d = c / half.
double candidate_step(float absmax, int64_t i, int bits) {
  const double c = static_cast<double>(absmax) * static_cast<double>(i) / static_cast<double>(kPbClipCandidates);
  return c / half_levels(bits);
}

}  // namespace

std::string_view pb_scheme_name(PbScheme s) { return s == PbScheme::paper ? "paper" : "octet"; }

void check_pb_config(const PbConfig& c, const std::string& what) {
  OCTET_CHECK(c.a_shift >= 0 && c.a_shift <= kPbMaxActShift, what,
              ": PrecisionBatching activation shift (paper scheme) must be in [0, ", kPbMaxActShift, "], got ",
              c.a_shift);
  OCTET_CHECK(c.w_bits >= 1 && c.w_bits <= kPbMaxWeightBits, what, ": PrecisionBatching weight bits must be in [1, ",
              kPbMaxWeightBits, "], got ", c.w_bits);
  OCTET_CHECK(c.a_bits >= kPbMinActivationBits && c.a_bits <= kPbMaxActivationBits, what,
              ": PrecisionBatching activation bits must be in [", kPbMinActivationBits, ", ", kPbMaxActivationBits,
              "], got ", c.a_bits);
}

std::string pb_config_name(const PbConfig& c) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "w" + std::to_string(...).
  std::string s = "w";
  s += std::to_string(c.w_bits);
  s += 'a';
  s += std::to_string(c.a_bits);
  if (c.scheme == PbScheme::paper) {
    s += "-paper";
    if (c.a_shift != kPbPaperActShift) s += "-s" + std::to_string(c.a_shift);
  }
  if (c.row_step) s += "-row";
  return s;
}

double PbWeights::plane_scale(int p) const {
  OCTET_CHECK(p >= 0 && p < num_planes(), "PbWeights::plane_scale: plane ", p, " outside [0, ", num_planes(), ")");
  const double s = std::ldexp(step, p);
  return p == num_planes() - 1 ? -s : s;
}

PbWeights PbWeights::to(Device d) const {
  PbWeights out = *this;
  if (planes.defined()) out.planes = planes.to(d);
  if (row_steps.defined()) out.row_steps = row_steps.to(d);
  return out;
}

double pb_weight_step(const float* w, int64_t n, int bits, bool clip_search) {
  check_weight_bits(bits, "pb_weight_step");
  OCTET_CHECK(n >= 0, "pb_weight_step: expected n >= 0, got ", n);
  const float m = weight_absmax(w, n, "pb_weight_step");
  if (m == 0.0f) return 1.0;
  if (!clip_search) return candidate_step(m, kPbClipCandidates, bits);
  // Errors per (block, candidate), summed over blocks in order: the same sums for any thread count
  // (and inside another parallel region, where parallel_for runs serially).
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> part(static_cast<size_t>(blocks * kPbClipCandidates));
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t begin = blk * kBlock, len = std::min(kBlock, n - begin);
      for (int64_t i = 1; i <= kPbClipCandidates; ++i)
        part[static_cast<size_t>(blk * kPbClipCandidates + i - 1)] =
            squared_error(w + begin, len, bits, candidate_step(m, i, bits));
    }
  });
  int64_t best = kPbClipCandidates;
  double best_err = std::numeric_limits<double>::infinity();
  for (int64_t i = 1; i <= kPbClipCandidates; ++i) {
    double err = 0.0;
    for (int64_t blk = 0; blk < blocks; ++blk) err += part[static_cast<size_t>(blk * kPbClipCandidates + i - 1)];
    if (err <= best_err) {  // the largest c on a tie
      best_err = err;
      best = i;
    }
  }
  return candidate_step(m, best, bits);
}

void pb_weight_codes(const float* w, int64_t n, int bits, double step, int32_t* q) {
  check_weight_bits(bits, "pb_weight_codes");
  OCTET_CHECK(step > 0.0 && std::isfinite(step), "pb_weight_codes: expected a finite step > 0, got ", step);
  const double half = half_levels(bits);
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int32_t>(code_of(w[i], bits, step, half));
}

namespace {

// One group's (the tensor's or a row's) rule from weights to codes, per scheme.
struct GroupGrid {
  double step = 1.0;  // d
  PbPaperGrid paper;  // the paper scheme's clip and exponent
};

GroupGrid group_grid(const float* w, int64_t n, const PbConfig& c) {
  GroupGrid g;
  if (c.scheme == PbScheme::paper) {
    g.paper = pb_paper_grid(w, n, c.w_bits, c.clip_search);
    g.step = g.paper.step();
  } else {
    g.step = pb_weight_step(w, n, c.w_bits, c.clip_search);
  }
  return g;
}

}  // namespace

PbWeights pb_preprocess(const Tensor& w, int bits, bool clip_search) {
  PbConfig c;
  c.w_bits = bits;
  c.clip_search = clip_search;
  return pb_preprocess(w, c);
}

PbWeights pb_preprocess(const Tensor& w, const PbConfig& c) {
  OCTET_CHECK(w.defined(), "pb_preprocess: expected a defined weight");
  OCTET_CHECK(w.dtype() == DType::f32, "pb_preprocess: expected weight dtype f32, got ", w.dtype());
  OCTET_CHECK(w.dim() == 2 && w.size(0) > 0 && w.size(1) > 0,
              "pb_preprocess: expected a non-empty 2-D weight [rows, cols], got ", w.shape());
  OCTET_CHECK(w.size(1) < kPbMaxCols, "pb_preprocess: expected fewer than ", kPbMaxCols, " columns, got ", w.size(1));
  const int bits = c.w_bits;
  check_weight_bits(bits, "pb_preprocess");
  check_device(w.device(), "pb_preprocess");
  const Tensor host = w.detach().to(Device::cpu()).contiguous();
  PbWeights out;
  out.rows = w.size(0);
  out.cols = w.size(1);
  out.bits = bits;
  const float* src = host.data<float>();
  const float absmax = weight_absmax(src, out.rows * out.cols, "pb_preprocess");  // the non-finite check
  OCTET_CHECK(c.scheme != PbScheme::paper || absmax < kPbPaperMaxAbs, "pb_preprocess: the paper scheme's fixed point ",
              "takes weights below ", kPbPaperMaxAbs, " in magnitude, got ", absmax);
  const int64_t rows = out.rows, cols = out.cols;
  std::vector<GroupGrid> grids(static_cast<size_t>(c.row_step ? rows : 1));
  if (c.row_step)
    parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) grids[static_cast<size_t>(r)] = group_grid(src + r * cols, cols, c);
    });
  else
    grids[0] = group_grid(src, rows * cols, c);
  out.step = 0.0;
  for (const GroupGrid& g : grids) out.step = std::max(out.step, g.step);
  if (c.row_step) {
    out.row_steps = empty({rows}, TensorOptions(DType::f64));
    for (int64_t r = 0; r < rows; ++r) out.row_steps.data<double>()[r] = grids[static_cast<size_t>(r)].step;
  }
  const int planes = out.num_planes();
  const int64_t words = out.words();
  Tensor packed = zeros({rows, planes, words}, TensorOptions(DType::i64));
  auto* dst = reinterpret_cast<uint64_t*>(packed.data<int64_t>());
  const double half = half_levels(bits);
  const bool paper = c.scheme == PbScheme::paper;
  parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const GroupGrid& g = grids[c.row_step ? static_cast<size_t>(r) : 0];
      const float* row = src + r * cols;
      uint64_t* pr = dst + r * planes * words;
      uint32_t code[64];
      for (int64_t w0 = 0; w0 < cols; w0 += 64) {
        const int n = static_cast<int>(std::min<int64_t>(64, cols - w0));
        for (int e = 0; e < n; ++e)
          code[e] = static_cast<uint32_t>(paper ? pb_paper_code(row[w0 + e], g.paper, bits)
                                                : static_cast<int32_t>(code_of(row[w0 + e], bits, g.step, half)));
        for (int p = 0; p < planes; ++p) {
          uint64_t word = 0;
          for (int e = 0; e < n; ++e) word |= static_cast<uint64_t>((code[e] >> p) & 1u) << e;
          pr[p * words + w0 / 64] = word;
        }
      }
    }
  });
  out.plane0_ones = bits == 1 && pb_plane0_all_ones(packed, cols);
  out.planes = w.device().is_cpu() ? packed : packed.to(w.device());
  if (out.row_steps.defined() && !w.device().is_cpu()) out.row_steps = out.row_steps.to(w.device());
  return out;
}

bool pb_plane0_all_ones(const Tensor& planes, int64_t cols) {
  OCTET_CHECK(planes.defined() && planes.dtype() == DType::i64 && planes.dim() == 3 && planes.size(2) == pb_words(cols),
              "pb_plane0_all_ones: expected i64 planes [rows, planes, ", pb_words(cols), "]");
  const Tensor h = planes.to(Device::cpu()).contiguous();
  const auto* p = reinterpret_cast<const uint64_t*>(h.data<int64_t>());
  const int64_t rows = h.size(0), n_planes = h.size(1), words = h.size(2), full = cols / 64;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < words; ++k) {
      const uint64_t want = k < full                      ? ~uint64_t{0}
                            : k == full && cols % 64 != 0 ? (uint64_t{1} << (cols % 64)) - 1
                                                          : uint64_t{0};
      if (p[r * n_planes * words + k] != want) return false;
    }
  return true;
}

namespace {

void check_weights(const PbWeights& w, const char* op) {
  check_weight_bits(w.bits, op);
  OCTET_CHECK(w.planes.defined() && w.planes.dtype() == DType::i64, op, ": expected i64 weight planes");
  OCTET_CHECK(w.rows >= 0 && w.cols >= 0 && w.cols < kPbMaxCols, op, ": bad weight shape [", w.rows, ", ", w.cols, "]");
  OCTET_CHECK(w.planes.shape() == Shape({w.rows, w.num_planes(), w.words()}), op, ": expected weight planes ",
              Shape({w.rows, w.num_planes(), w.words()}), ", got ", w.planes.shape());
  OCTET_CHECK(w.planes.is_contiguous(), op, ": expected contiguous weight planes");
  OCTET_CHECK(w.step > 0.0 && std::isfinite(w.step), op, ": expected a finite step > 0, got ", w.step);
  check_device(w.planes.device(), op);
  if (w.row_steps.defined())
    OCTET_CHECK(w.row_steps.dtype() == DType::f64 && w.row_steps.shape() == Shape({w.rows}) &&
                    w.row_steps.is_contiguous() && w.row_steps.device() == w.planes.device(),
                op, ": expected contiguous f64 row steps [", w.rows, "] on ", w.planes.device());
}

void check_activations(const PbActivations& x, const char* op) {
  check_activation_bits(x.bits, op);
  OCTET_CHECK(x.planes.defined() && x.planes.dtype() == DType::i64 && x.planes.is_contiguous(), op,
              ": expected contiguous i64 activation planes");
  OCTET_CHECK(x.batch >= 0 && x.cols >= 0 && x.cols < kPbMaxCols, op, ": bad activation shape [", x.batch, ", ", x.cols,
              "]");
  OCTET_CHECK(x.planes.shape() == Shape({x.batch, x.bits, pb_words(x.cols)}), op, ": expected activation planes ",
              Shape({x.batch, x.bits, pb_words(x.cols)}), ", got ", x.planes.shape());
  OCTET_CHECK(x.scale.defined() && x.scale.dtype() == DType::f64 && x.scale.shape() == Shape({x.batch}) &&
                  x.scale.is_contiguous(),
              op, ": expected a contiguous f64 scale [", x.batch, "]");
  OCTET_CHECK(x.scale.device() == x.planes.device(), op, ": activation planes on ", x.planes.device(), " but scale on ",
              x.scale.device());
}

}  // namespace

Tensor pb_decode(const PbWeights& w) {
  check_weights(w, "pb_decode");
  const Tensor planes = w.planes.to(Device::cpu());
  const auto* src = reinterpret_cast<const uint64_t*>(planes.data<int64_t>());
  Tensor q = empty({w.rows, w.cols}, TensorOptions(DType::i32));
  int32_t* dst = q.data<int32_t>();
  const int P = w.num_planes();
  const int64_t words = w.words();
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t k = 0; k < w.cols; ++k) {
      int32_t v = 0;
      for (int p = 0; p < P; ++p) {
        const int32_t bit = static_cast<int32_t>((src[(r * P + p) * words + k / 64] >> (k % 64)) & 1u);
        v += p == P - 1 ? -(bit << p) : (bit << p);
      }
      dst[r * w.cols + k] = v;
    }
  return q;
}

PbActivations pb_quantize_activations(const Tensor& x, int bits) {
  check_activation_bits(bits, "pb_quantize_activations");
  const Tensor c = activation_operand(x, "pb_quantize_activations");
  return dispatch::pb_quantize(c, bits);
}

PbActivations pb_quantize_activations(const Tensor& x, const PbConfig& c) {
  check_pb_config(c, "pb_quantize_activations");
  if (c.scheme == PbScheme::octet) return pb_quantize_activations(x, c.a_bits);
  const Tensor t = activation_operand(x, "pb_quantize_activations");
  return dispatch::pb_quantize_fixed(t, c.a_bits, c.a_shift);
}

Tensor pb_activation_codes(const Tensor& x, int bits) {
  check_activation_bits(bits, "pb_activation_codes");
  const Tensor c = activation_operand(x, "pb_activation_codes").to(Device::cpu());
  const int64_t batch = c.size(0), cols = c.size(1);
  Tensor q = zeros({batch, cols}, TensorOptions(DType::i32));
  const float* src = c.data<float>();
  int32_t* dst = q.data<int32_t>();
  const double limit = std::ldexp(1.0, bits - 1) - 1.0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* xb = src + b * cols;
    bool finite = true;
    float m = 0.0f;
    for (int64_t i = 0; i < cols; ++i) {
      finite = finite && std::isfinite(xb[i]);
      m = std::max(m, std::fabs(xb[i]));
    }
    if (!finite || m == 0.0f) continue;  // codes 0 (a non-finite row's scale is NaN)
    const double inv = limit / static_cast<double>(m);
    for (int64_t i = 0; i < cols; ++i) {
      const double v = std::nearbyint(static_cast<double>(xb[i]) * inv);
      dst[b * cols + i] = static_cast<int32_t>(std::clamp(v, -limit, limit));
    }
  }
  return q;
}

Tensor pb_activation_codes(const Tensor& x, const PbConfig& c) {
  check_pb_config(c, "pb_activation_codes");
  if (c.scheme == PbScheme::octet) return pb_activation_codes(x, c.a_bits);
  const Tensor t = activation_operand(x, "pb_activation_codes").to(Device::cpu());
  Tensor q = zeros({t.size(0), t.size(1)}, TensorOptions(DType::i32));
  const float* src = t.data<float>();
  int32_t* dst = q.data<int32_t>();
  const int64_t batch = t.size(0), cols = t.size(1);
  const double factor = std::ldexp(1.0, c.a_shift);
  const int drop = 32 - c.a_bits;
  for (int64_t b = 0; b < batch; ++b) {
    const float* xb = src + b * cols;
    if (!std::all_of(xb, xb + cols, [](float v) { return std::isfinite(v); })) continue;  // codes 0, scale NaN
    for (int64_t i = 0; i < cols; ++i) {
      // trunc, saturated to int32, then the low a_bits bits sign-extended (the wrap on overflow)
      const double v = std::clamp(std::trunc(static_cast<double>(xb[i]) * factor), -2147483648.0, 2147483647.0);
      const uint32_t u = static_cast<uint32_t>(static_cast<int32_t>(v)) << drop;
      dst[b * cols + i] = static_cast<int32_t>(u) >> drop;
    }
  }
  return q;
}

Tensor pb_linear(const PbWeights& w, const PbActivations& x, const Tensor& bias) {
  check_weights(w, "pb_linear");
  check_activations(x, "pb_linear");
  OCTET_CHECK(x.cols == w.cols, "pb_linear: input has ", x.cols, " columns, weights ", w.cols);
  OCTET_CHECK(x.planes.device() == w.planes.device(), "pb_linear: input on ", x.planes.device(), " but weights on ",
              w.planes.device());
  if (bias.defined()) {
    OCTET_CHECK(bias.dtype() == DType::f32 && bias.shape() == Shape({w.rows}), "pb_linear: expected an f32 bias [",
                w.rows, "], got ", bias.dtype(), " ", bias.shape());
    OCTET_CHECK(bias.device() == w.planes.device(), "pb_linear: bias on ", bias.device(), " but weights on ",
                w.planes.device());
  }
  return dispatch::pb_linear(w, x, bias.defined() ? bias.detach().contiguous() : Tensor());
}

Tensor pb_linear(const PbWeights& w, const Tensor& x, int a_bits, const Tensor& bias) {
  check_activation_bits(a_bits, "pb_linear");
  const Tensor c = activation_operand(x, "pb_linear");
  OCTET_CHECK(c.size(1) == w.cols, "pb_linear: input has ", c.size(1), " columns, weights ", w.cols);
  return pb_linear(w, pb_quantize_activations(c, a_bits), bias);
}

Tensor pb_linear(const PbWeights& w, const Tensor& x, const PbConfig& cfg, const Tensor& bias) {
  check_pb_config(cfg, "pb_linear");
  const Tensor c = activation_operand(x, "pb_linear");
  OCTET_CHECK(c.size(1) == w.cols, "pb_linear: input has ", c.size(1), " columns, weights ", w.cols);
  return pb_linear(w, pb_quantize_activations(c, cfg), bias);
}

Tensor pb_linear_reference(const PbWeights& w, const Tensor& x, int a_bits, const Tensor& bias) {
  PbConfig c;
  c.a_bits = a_bits;
  return pb_linear_reference(w, x, c, bias);
}

Tensor pb_linear_reference(const PbWeights& w, const Tensor& x, const PbConfig& cfg, const Tensor& bias) {
  check_weights(w, "pb_linear_reference");
  check_pb_config(cfg, "pb_linear_reference");
  const Tensor c = activation_operand(x, "pb_linear_reference").to(Device::cpu());
  OCTET_CHECK(c.size(1) == w.cols, "pb_linear_reference: input has ", c.size(1), " columns, weights ", w.cols);
  const Tensor q = pb_decode(w);
  const Tensor xq = pb_activation_codes(c, cfg);
  const Tensor scale = pb_quantize_activations(c, cfg).scale;
  const Tensor b_c = bias.defined() ? bias.detach().to(Device::cpu()).contiguous() : Tensor();
  const Tensor steps = w.row_steps.defined() ? w.row_steps.to(Device::cpu()) : Tensor();
  OCTET_CHECK(!b_c.defined() || (b_c.dtype() == DType::f32 && b_c.shape() == Shape({w.rows})),
              "pb_linear_reference: expected an f32 bias [", w.rows, "]");
  const int64_t batch = c.size(0), rows = w.rows, cols = w.cols;
  Tensor y = empty({batch, rows}, TensorOptions(DType::f64));
  const int32_t* qp = q.data<int32_t>();
  const int32_t* xp = xq.data<int32_t>();
  const double* sp = scale.data<double>();
  double* yp = y.data<double>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = 0; r < rows; ++r) {
      const double d = steps.defined() ? steps.data<double>()[r] : w.step;
      double s = 0.0;
      for (int64_t k = 0; k < cols; ++k) s += (d * qp[r * cols + k]) * (sp[b] * xp[b * cols + k]);
      yp[b * rows + r] = s + (b_c.defined() ? static_cast<double>(b_c.data<float>()[r]) : 0.0);
    }
  return y;
}

}  // namespace octet::quant
