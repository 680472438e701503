// The INT8 convolution op (quant/int8_conv.h): checks, quantization of the operands, the device
// kernels (quant/cpu/int8_conv.h) and the autograd node with the INT8 backward.
#include "quant/int8_conv.h"

#include <cmath>
#include <limits>

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/reduce.h"
#include "quant/cpu/int8_conv.h"
#include "quant/cpu/int8_quant.h"
#include "quant/dsgc.h"
#include "quant/int8_tensor.h"

namespace octet::quant {

using autograd::Grads;
using kernels::Conv2dGeometry;

namespace {

constexpr const char* kOp = "int8_conv2d";

Conv2dGeometry checked_geometry(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& o) {
  OCTET_CHECK(x.defined() && w.defined(), kOp, ": undefined ", x.defined() ? "weight" : "input");
  OCTET_CHECK(x.dim() == 4, kOp, ": expected 4-D input [N,C,H,W], got ", x.shape());
  OCTET_CHECK(w.dim() == 4, kOp, ": expected 4-D weight [K,C/groups,R,S], got ", w.shape());
  OCTET_CHECK(x.dtype() == DType::f32, kOp, ": expected an f32 input, got ", x.dtype());
  OCTET_CHECK(w.dtype() == DType::f32, kOp, ": expected an f32 weight, got ", w.dtype());
  OCTET_CHECK(w.device() == x.device(), kOp, ": input is on ", x.device(), " but weight is on ", w.device());
  OCTET_CHECK(x.device().is_cpu(), kOp, ": no INT8 convolution kernels for device ", x.device(), " yet (CPU only)");
  OCTET_CHECK(o.stride_h_ > 0 && o.stride_w_ > 0, kOp, ": expected positive stride, got (", o.stride_h_, ", ",
              o.stride_w_, ")");
  OCTET_CHECK(o.dil_h_ > 0 && o.dil_w_ > 0, kOp, ": expected positive dilation, got (", o.dil_h_, ", ", o.dil_w_, ")");
  OCTET_CHECK(o.pad_h_ >= 0 && o.pad_w_ >= 0, kOp, ": expected nonnegative padding, got (", o.pad_h_, ", ", o.pad_w_,
              ")");
  OCTET_CHECK(o.groups_ > 0, kOp, ": expected groups >= 1, got ", o.groups_);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t k = w.size(0), r = w.size(2), s = w.size(3);
  OCTET_CHECK(n > 0 && c > 0 && h > 0 && wd > 0, kOp, ": expected a nonempty input, got ", x.shape());
  OCTET_CHECK(k > 0 && r > 0 && s > 0, kOp, ": expected a nonempty weight, got ", w.shape());
  OCTET_CHECK(c % o.groups_ == 0, kOp, ": input channels ", c, " are not divisible by groups ", o.groups_);
  OCTET_CHECK(k % o.groups_ == 0, kOp, ": output channels ", k, " are not divisible by groups ", o.groups_);
  OCTET_CHECK(w.size(1) == c / o.groups_, kOp, ": expected weight of shape [", k, ", ", c / o.groups_, ", R, S] for ",
              c, " input channels and groups ", o.groups_, ", got ", w.shape());
  if (bias.defined()) {
    OCTET_CHECK(bias.dim() == 1 && bias.size(0) == k, kOp, ": expected bias of shape [", k, "], got ", bias.shape());
    OCTET_CHECK(bias.dtype() == DType::f32, kOp, ": expected an f32 bias, got ", bias.dtype());
    OCTET_CHECK(bias.device() == x.device(), kOp, ": input is on ", x.device(), " but bias is on ", bias.device());
  }
  const int64_t span_h = o.dil_h_ * (r - 1) + 1, span_w = o.dil_w_ * (s - 1) + 1;
  OCTET_CHECK(span_h <= h + 2 * o.pad_h_ && span_w <= wd + 2 * o.pad_w_, kOp, ": dilated kernel (", span_h, ", ",
              span_w, ") is larger than the padded input (", h + 2 * o.pad_h_, ", ", wd + 2 * o.pad_w_, ")");
  Conv2dGeometry g{};
  g.n = n, g.c = c, g.h = h, g.w = wd, g.k = k, g.r = r, g.s = s;
  g.p = (h + 2 * o.pad_h_ - span_h) / o.stride_h_ + 1;
  g.q = (wd + 2 * o.pad_w_ - span_w) / o.stride_w_ + 1;
  g.stride_h = o.stride_h_, g.stride_w = o.stride_w_, g.pad_h = o.pad_h_, g.pad_w = o.pad_w_;
  g.dil_h = o.dil_h_, g.dil_w = o.dil_w_, g.groups = o.groups_;
  return g;
}

// The clip of backward pass t's output gradient (see the header); counts a search.
float gradient_clip(const Tensor& dy, Int8Layer& layer) {
  const Int8Config& cfg = layer.config;
  Int8Stats& st = layer.stats;
  if (!cfg.dsgc) return int8_absmax(dy);
  const bool stale = !(st.grad_clip > 0.0f && std::isfinite(st.grad_clip));
  if (st.backward_steps % cfg.clip_update_period != 0 && !stale) return st.grad_clip;
  ++st.searches;
  return dsgc_search(dy).clip;
}

}  // namespace

Tensor int8_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opts,
                   const std::shared_ptr<Int8Layer>& layer) {
  OCTET_CHECK(layer != nullptr, kOp, ": expected an Int8Layer (layer state), got a null pointer");
  OCTET_CHECK(layer->config.clip_update_period >= 1, kOp, ": expected config.clip_update_period >= 1, got ",
              layer->config.clip_update_period);
  const Conv2dGeometry g = checked_geometry(x, w, bias, opts);

  Tensor xc, wc, bc;
  {
    NoGradGuard no_grad;  // the copies feed the kernels only; the node below links x, w, bias
    xc = x.detach().contiguous(), wc = w.detach().contiguous();
    bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  }
  // Forward operands: round to nearest at clip = max|.|; x's codes channel-major [C,N,H,W].
  const float clip_x = int8_absmax(xc), clip_w = int8_absmax(wc);
  layer->stats.input_clip = clip_x, layer->stats.weight_clip = clip_w;
  Tensor xq = empty({g.c, g.n, g.h, g.w}, DType::i8), wq = empty(w.shape(), DType::i8);
  cpu::quantize_transposed(xc.data<float>(), g.n, g.c, g.h * g.w, int8_inv_scale(clip_x), Int8Rounding::nearest, 0,
                           xq.data<int8_t>());
  cpu::quantize(wc.data<float>(), wc.numel(), int8_inv_scale(clip_w), Int8Rounding::nearest, 0, 0, wq.data<int8_t>());
  const float sx = int8_scale(clip_x), sw = int8_scale(clip_w);

  Tensor out = empty({g.n, g.k, g.p, g.q}, DType::f32);
  cpu::int8_conv2d_forward(g, xq, wq, sx * sw, bc, out);

  if (autograd::needs_grad({x, w, bias})) {
    const bool rx = x.requires_grad(), rw = w.requires_grad(), rb = bias.defined() && bias.requires_grad();
    autograd::record(kOp, {x, w, bias}, {out}, [=](const Grads& gr) {
      Tensor dy = gr[0].contiguous();
      Tensor dx, dw;
      if (rx || rw) {
        Int8Layer& L = *layer;
        const int64_t step = L.stats.backward_steps;
        const float clip = gradient_clip(dy, L);
        const Int8Rounding rounding = L.config.stochastic_rounding ? Int8Rounding::stochastic : Int8Rounding::nearest;
        Tensor dyq = empty({g.k, g.n, g.p, g.q}, DType::i8);
        cpu::CosineSums sums;
        cpu::quantize_transposed(dy.data<float>(), g.n, g.k, g.p * g.q, int8_inv_scale(clip), rounding,
                                 int8_backward_seed(L.seed, step), dyq.data<int8_t>(), &sums);
        // A NaN or infinite dy (or clip) must not turn into zeros: it makes the gradients NaN.
        const float sdy =
            sums.finite && std::isfinite(clip) ? int8_scale(clip) : std::numeric_limits<float>::quiet_NaN();
        if (rx) {
          dx = empty(x.shape(), DType::f32);
          cpu::int8_conv2d_backward_input(g, dyq, wq, sdy * sw, dx);
        }
        if (rw) {
          dw = empty(w.shape(), DType::f32);
          cpu::int8_conv2d_backward_weight(g, xq, dyq, sdy * sx, dw);
        }
        L.stats.grad_clip = clip;
        L.stats.cos_distance = cpu::cosine_distance(sums);
        ++L.stats.backward_steps;
      }
      return Grads{dx, dw, rb ? sum(dy, {0, 2, 3}) : Tensor()};
    });
  }
  return out;
}

}  // namespace octet::quant
