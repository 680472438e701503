// The CPU side of quant/'s kernel list (quant/cpu/kernels.h): each entry runs the loops of
// quant/cpu/*.h on host tensors. quant/kernels.cpp calls these for CPU tensors.
#include "quant/cpu/kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/isa.h"
#include "core/error.h"
#include "quant/cpu/blockwise.h"
#include "quant/cpu/int8_conv.h"
#include "quant/cpu/int8_quant.h"
#include "quant/cpu/pbatch.h"
#include "quant/cpu/qgemm.h"

namespace octet::quant::cpu {

// ---- INT8 quantization and its cosine statistics

float absmax_of(const Tensor& x) { return absmax(x.data<float>(), x.numel()); }

std::array<float, 2> absmax_pair(const Tensor& a, const Tensor& b) { return {absmax_of(a), absmax_of(b)}; }

void int8_quantize_into(const Tensor& x, float inv_scale, Int8Rounding rounding, uint64_t seed, const Tensor& codes) {
  quantize(x.data<float>(), x.numel(), inv_scale, rounding, seed, 0, codes.data<int8_t>());
}

void int8_dequantize_into(const Tensor& codes, float scale, const Tensor& out) {
  dequantize(codes.data<int8_t>(), codes.numel(), scale, out.data<float>());
}

std::vector<CosineSums> nearest_sums(const Tensor& g, const std::vector<float>& inv_scales) {
  std::vector<CosineSums> sums;
  for (float inv : inv_scales) sums.push_back(cosine_sums_nearest(g.data<float>(), g.numel(), inv));
  return sums;
}

CosineSums rounded_sums(const Tensor& g, float inv_scale, Int8Rounding rounding, uint64_t seed) {
  if (rounding == Int8Rounding::nearest) return cosine_sums_nearest(g.data<float>(), g.numel(), inv_scale);
  std::vector<int8_t> codes(static_cast<size_t>(g.numel()));
  CosineSums sums;
  quantize_transposed(g.data<float>(), 1, 1, g.numel(), inv_scale, rounding, seed, codes.data(), &sums);
  return sums;
}

// ---- the INT8 convolution

// Round to nearest at clip = max|.|, x straight into its channel-major codes (one pass over the
// floats); then the forward kernels.
Int8ConvKept int8_conv_forward(const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                               float clip_x, float clip_w, const Tensor& out) {
  Tensor xq = empty({g.c, g.n, g.h, g.w}, DType::i8);
  quantize_transposed(x.data<float>(), g.n, g.c, g.h * g.w, int8_inv_scale(clip_x), Int8Rounding::nearest, 0,
                      xq.data<int8_t>());
  return int8_conv_forward_codes(g, xq, clip_x, w, bias, clip_w, out);
}

Int8ConvKept int8_conv_forward_codes(const Conv2dGeometry& g, const Tensor& xq, float clip_x, const Tensor& w,
                                     const Tensor& bias, float clip_w, const Tensor& out) {
  Int8ConvKept k;
  k.inv_x = int8_inv_scale(clip_x);
  k.x = xq, k.wq = empty(w.shape(), DType::i8);
  quantize(w.data<float>(), w.numel(), int8_inv_scale(clip_w), Int8Rounding::nearest, 0, 0, k.wq.data<int8_t>());
  int8_conv2d_forward(g, k.x, k.wq, int8_scale(clip_x) * int8_scale(clip_w), bias, out);
  return k;
}

// dy quantized once (with the bias gradient's sums in the same pass), then dx and dw.
Int8ConvGrads int8_conv_backward(const Conv2dGeometry& g, const Tensor& dy, const Int8ConvKept& kept, float clip,
                                 Int8Rounding rounding, uint64_t seed, float sx, float sw, bool want_db) {
  Int8ConvGrads r;
  Tensor dyq = empty({g.k, g.n, g.p, g.q}, DType::i8);
  std::vector<double> dy_sums(want_db ? static_cast<size_t>(g.k) : 0);
  quantize_transposed(dy.data<float>(), g.n, g.k, g.p * g.q, int8_inv_scale(clip), rounding, seed, dyq.data<int8_t>(),
                      &r.sums, want_db ? dy_sums.data() : nullptr);
  if (want_db) {
    r.db = empty({g.k}, DType::f32);
    float* d = r.db.data<float>();
    for (int64_t c = 0; c < g.k; ++c) d[c] = static_cast<float>(dy_sums[c]);
  }
  // A NaN or infinite dy (or clip) must not turn into zeros: it makes the gradients NaN.
  const float sdy = r.sums.finite && std::isfinite(clip) ? int8_scale(clip) : std::numeric_limits<float>::quiet_NaN();
  if (kept.wq.defined()) {
    r.dx = empty({g.n, g.c, g.h, g.w}, DType::f32);
    int8_conv2d_backward_input(g, dyq, kept.wq, sdy * sw, r.dx);
  }
  if (kept.x.defined()) {
    r.dw = empty({g.k, g.c / g.groups, g.r, g.s}, DType::f32);
    int8_conv2d_backward_weight(g, kept.x, dyq, sdy * sx, r.dw);
  }
  return r;
}

// The CPU has one path per product.
std::array<Int8ConvPath, 3> last_paths(const Tensor&, const Conv2dGeometry&) {
  return {Int8ConvPath::automatic, Int8ConvPath::automatic, Int8ConvPath::automatic};
}

// ---- block-wise quantization

void blockwise_quantize_into(const Tensor& x, int64_t block_size, QuantMap map, const Tensor& codes,
                             const Tensor& absmax) {
  quantize_blocks(x.data<float>(), x.numel(), block_size, quant_map(map).data(), codes.data<uint8_t>(),
                  absmax.data<float>());
}

void blockwise_dequantize_into(const Tensor& codes, int64_t block_size, const Tensor& absmax, QuantMap map,
                               const Tensor& out) {
  dequantize_blocks(codes.data<uint8_t>(), codes.numel(), block_size, absmax.data<float>(), quant_map(map).data(),
                    out.data<float>());
}

// ---- PrecisionBatching

// Planes and scales for x [batch, cols] at `bits`, to be filled.
static PbActivations activations_for(const Tensor& x, int bits) {
  PbActivations a;
  a.batch = x.size(0);
  a.cols = x.size(1);
  a.bits = bits;
  a.planes = empty({a.batch, bits, pb_words(a.cols)}, TensorOptions(DType::i64));
  a.scale = empty({a.batch}, TensorOptions(DType::f64));
  return a;
}

PbActivations pb_quantize(const Tensor& x, int bits) {
  PbActivations a = activations_for(x, bits);
  pb_quantize(x.data<float>(), a.batch, a.cols, bits, reinterpret_cast<uint64_t*>(a.planes.data<int64_t>()),
              a.scale.data<double>());
  return a;
}

PbActivations pb_quantize_fixed(const Tensor& x, int bits, int shift) {
  PbActivations a = activations_for(x, bits);
  pb_quantize_fixed(x.data<float>(), a.batch, a.cols, bits, shift,
                    reinterpret_cast<uint64_t*>(a.planes.data<int64_t>()), a.scale.data<double>());
  return a;
}

// The product in batches of at most kPbMaxBatch rows, each rescaled by its activation scale and the
// weight step (per tensor, or per row).
Tensor pb_linear(const PbWeights& w, const PbActivations& x, const Tensor& bias) {
  Tensor y = empty({x.batch, w.rows}, TensorOptions(DType::f32));
  if (x.batch == 0 || w.rows == 0) return y;
  const auto* wp = reinterpret_cast<const uint64_t*>(w.planes.data<int64_t>());
  const auto* xp = reinterpret_cast<const uint64_t*>(x.planes.data<int64_t>());
  const double* scale = x.scale.data<double>();
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  const double* row_steps = w.row_steps.defined() ? w.row_steps.data<double>() : nullptr;
  float* yp = y.data<float>();
  const int64_t words = w.words(), rows = w.rows;
  std::vector<int64_t> acc(static_cast<size_t>(std::min(x.batch, kPbMaxBatch) * rows));
  for (int64_t b0 = 0; b0 < x.batch; b0 += kPbMaxBatch) {
    const int64_t nb = std::min(kPbMaxBatch, x.batch - b0);
    const uint64_t* xb = xp + b0 * x.bits * words;
    if (w.bits == 1 && w.plane0_ones)
      pb_gemm_1bit(wp, rows, words, xb, nb, x.bits, acc.data());
    else
      pb_gemm(wp, rows, w.num_planes(), words, xb, nb, x.bits, acc.data());
    for (int64_t b = 0; b < nb; ++b) {
      const double sb = scale[b0 + b];
      float* yr = yp + (b0 + b) * rows;
      const int64_t* ar = acc.data() + b * rows;
      if (row_steps == nullptr) {
        const double s = w.step * sb;
        for (int64_t r = 0; r < rows; ++r) {
          const float v = static_cast<float>(static_cast<double>(ar[r]) * s);
          yr[r] = bp ? v + bp[r] : v;
        }
      } else {
        for (int64_t r = 0; r < rows; ++r) {
          const float v = static_cast<float>(static_cast<double>(ar[r]) * (row_steps[r] * sb));
          yr[r] = bp ? v + bp[r] : v;
        }
      }
    }
  }
  return y;
}

// ---- the zero-point int8 Linear

Tensor qlinear_rows(const QLinearWeights& w, const Tensor& x, const Tensor& bias) {
  const int64_t batch = x.size(0), cols = x.size(1), rows = w.rows;
  Tensor y = empty({batch, rows}, DType::f32);
  if (batch == 0) return y;
  std::vector<uint8_t> codes(static_cast<size_t>(batch * cols));
  std::vector<float> scale(static_cast<size_t>(batch));
  std::vector<int32_t> za(static_cast<size_t>(batch));
  quantize_rows_u8(x.data<float>(), batch, cols, codes.data(), scale.data(), za.data());
  std::vector<int32_t> acc(static_cast<size_t>(batch * rows));
  quant::qgemm(batch, rows, cols, QType::u8, codes.data(), cols, za.data(), QType::s8, w.codes.data<int8_t>(), cols, 0,
               acc.data(), rows, w.row_sums.data<int32_t>());
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  float* yp = y.data<float>();
  for (int64_t b = 0; b < batch; ++b) {
    const float s = scale[b] * w.w.scale;
    const int32_t* ab = acc.data() + b * rows;
    float* yb = yp + b * rows;
    octet::cpu::simd_dispatch([=] {
      if (bp != nullptr)
        for (int64_t r = 0; r < rows; ++r) yb[r] = static_cast<float>(ab[r]) * s + bp[r];
      else
        for (int64_t r = 0; r < rows; ++r) yb[r] = static_cast<float>(ab[r]) * s;
    });
  }
  return y;
}

}  // namespace octet::quant::cpu
