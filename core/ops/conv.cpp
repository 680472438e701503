#include "core/ops/conv.h"

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/kernels.h"
#include "core/memory_format.h"
#include "core/ops/reduce.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

// x [N,C,H,W], w [K,C/g,R,S], bias [K] -> [N,K,P,Q]
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& o) {
  OCTET_CHECK(x.defined() && w.defined(), "conv2d: undefined ", x.defined() ? "weight" : "input");
  OCTET_CHECK(x.dim() == 4, "conv2d: expected 4-D input [N,C,H,W], got ", x.shape());
  OCTET_CHECK(w.dim() == 4, "conv2d: expected 4-D weight [K,C/groups,R,S], got ", w.shape());
  // autocast (core/autocast.h), or a bf16 operand (autocast's activations): the bf16 product.
  const bool bf16 = autocast::lowers("conv2d", {x, w});
  OCTET_CHECK(bf16 || x.dtype() == DType::f32 || x.dtype() == DType::f64,
              "conv2d: expected dtype f32, f64 or bf16, got ", x.dtype());
  OCTET_CHECK(bf16 || w.dtype() == x.dtype(), "conv2d: dtypes differ: input ", x.dtype(), ", weight ", w.dtype());
  OCTET_CHECK(w.device() == x.device(), "conv2d: input is on ", x.device(), " but weight is on ", w.device());
  OCTET_CHECK(o.stride_h_ > 0 && o.stride_w_ > 0, "conv2d: expected positive stride, got (", o.stride_h_, ", ",
              o.stride_w_, ")");
  OCTET_CHECK(o.dil_h_ > 0 && o.dil_w_ > 0, "conv2d: expected positive dilation, got (", o.dil_h_, ", ", o.dil_w_, ")");
  OCTET_CHECK(o.pad_h_ >= 0 && o.pad_w_ >= 0, "conv2d: expected nonnegative padding, got (", o.pad_h_, ", ", o.pad_w_,
              ")");
  OCTET_CHECK(o.groups_ > 0, "conv2d: expected groups >= 1, got ", o.groups_);

  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t k = w.size(0), r = w.size(2), s = w.size(3);
  OCTET_CHECK(c > 0 && h > 0 && wd > 0, "conv2d: expected nonempty channels and planes, got input ", x.shape());
  OCTET_CHECK(k > 0 && r > 0 && s > 0, "conv2d: expected a nonempty weight, got ", w.shape());
  OCTET_CHECK(c % o.groups_ == 0, "conv2d: input channels ", c, " are not divisible by groups ", o.groups_);
  OCTET_CHECK(k % o.groups_ == 0, "conv2d: output channels ", k, " are not divisible by groups ", o.groups_);
  OCTET_CHECK(w.size(1) == c / o.groups_, "conv2d: expected weight of shape [", k, ", ", c / o.groups_, ", R, S] for ",
              c, " input channels and groups ", o.groups_, ", got ", w.shape());
  if (bias.defined()) {
    OCTET_CHECK(bias.dim() == 1 && bias.size(0) == k, "conv2d: expected bias of shape [", k, "], got ", bias.shape());
    OCTET_CHECK(bias.dtype() == (bf16 ? DType::f32 : x.dtype()), "conv2d: dtypes differ: input ", x.dtype(), ", bias ",
                bias.dtype(), bf16 ? " (a bf16 convolution takes an f32 bias)" : "");
    OCTET_CHECK(bias.device() == x.device(), "conv2d: input is on ", x.device(), " but bias is on ", bias.device());
  }
  const int64_t span_h = o.dil_h_ * (r - 1) + 1, span_w = o.dil_w_ * (s - 1) + 1;
  OCTET_CHECK(span_h <= h + 2 * o.pad_h_ && span_w <= wd + 2 * o.pad_w_, "conv2d: dilated kernel (", span_h, ", ",
              span_w, ") is larger than the padded input (", h + 2 * o.pad_h_, ", ", wd + 2 * o.pad_w_, ")");

  kernels::Conv2dGeometry g{};
  g.n = n, g.c = c, g.h = h, g.w = wd, g.k = k, g.r = r, g.s = s;
  g.p = (h + 2 * o.pad_h_ - span_h) / o.stride_h_ + 1;
  g.q = (wd + 2 * o.pad_w_ - span_w) / o.stride_w_ + 1;
  g.stride_h = o.stride_h_, g.stride_w = o.stride_w_, g.pad_h = o.pad_h_, g.pad_w = o.pad_w_;
  g.dil_h = o.dil_h_, g.dil_w = o.dil_w_, g.groups = o.groups_;

  // On the CPU a channels-last input gives a channels-last output and input gradient (oneDNN's nhwc
  // kernels; core/memory_format.h); elsewhere the kernels take NCHW.
  const bool channels_last = keeps_channels_last(x);
  // autocast (core/autocast.h): x and w in bf16 (w cast once per scope), summed in f32 with the f32
  // bias and written as autocast::output_dtype (bf16 on the CPU); the backward reads the bf16
  // copies and dout and writes f32 dw, and dx in the output's dtype for a bf16 x (else in x's).
  const DType out_t = bf16 ? autocast::output_dtype(x.device()) : x.dtype();
  const DType dx_t = x.dtype() == DType::bf16 ? out_t : x.dtype();
  Tensor xc, wc, bc;
  {
    NoGradGuard no_grad;  // the copies feed the kernel only; the node below links x, w, bias
    xc = channels_last ? x.detach() : x.contiguous(), wc = w.contiguous();
    if (bf16) xc = autocast::cast(xc, DType::bf16), wc = autocast::cast(w, DType::bf16).contiguous();
    bc = bias.defined() ? bias.contiguous() : Tensor();
  }
  const TensorOptions like_out = TensorOptions(out_t).device(x.device());
  Tensor out = channels_last ? empty_channels_last({n, k, g.p, g.q}, like_out) : empty({n, k, g.p, g.q}, like_out);
  kernels::conv2d_forward(g, xc, wc, bc, out);

  if (autograd::needs_grad({x, w, bias})) {
    bool rx = x.requires_grad(), rw = w.requires_grad(), rb = bias.defined() && bias.requires_grad();
    autograd::record("conv2d", {x, w, bias}, {out}, [=, saved_x = saved(xc), saved_w = saved(wc)](const Grads& gr) {
      const Tensor& sx = saved_x.get();
      const Tensor& sw = saved_w.get();
      Tensor dout = channels_last ? to_channels_last(gr[0].detach()) : gr[0].contiguous();
      const Device dev = sx.device();
      Tensor dx = rx ? empty_in_format_of(sx, sx.shape(), TensorOptions(dx_t).device(dev)) : Tensor();
      Tensor dw = rw ? empty(sw.shape(), TensorOptions(bf16 ? DType::f32 : sx.dtype()).device(dev)) : Tensor();
      kernels::conv2d_backward(g, sx, sw, bf16 ? autocast::cast(dout, DType::bf16) : dout, dx, dw);
      return Grads{dx, dw, rb ? sum(dout, {0, 2, 3}) : Tensor()};
    });
  }
  return out;
}

}  // namespace octet
