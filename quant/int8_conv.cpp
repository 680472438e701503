// The INT8 convolution op (quant/int8_conv.h) and the INT8 Linear, a 1x1 convolution of its rows
// (quant/int8_linear.h): checks, the clips, the device kernels through
// quant/kernels.h (quant/cpu/int8_conv.h, or for CUDA tensors quant/cuda/int8_conv.h) and the
// autograd node with the INT8 backward; the CUDA kernel path setting.
#include "quant/int8_conv.h"
#include "quant/int8_linear.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/autograd.h"
#include "core/kernels.h"
#include "core/ops/linalg.h"
#include "core/ops/nn.h"
#include "core/ops/reduce.h"
#include "quant/dsgc.h"
#include "quant/int8_tensor.h"
#include "quant/kernels.h"

namespace octet::quant {

using autograd::Grads;
using kernels::Conv2dGeometry;

namespace {

constexpr const char* kOp = "int8_conv2d";

// Under autocast an INT8 layer's f32 output is rounded to autocast::output_dtype (bf16 on the CPU),
// as the bf16 products write theirs, so the activations after it (batch norm, ReLU, adds) and what
// their backward keeps stay bf16 too. Differentiable: the gradient comes back widened to f32.
Tensor autocast_output(const Tensor& y) { return autocast::enabled() ? y.to(autocast::output_dtype(y.device())) : y; }

Conv2dGeometry checked_geometry(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& o) {
  OCTET_CHECK(x.defined() && w.defined(), kOp, ": undefined ", x.defined() ? "weight" : "input");
  OCTET_CHECK(x.dim() == 4, kOp, ": expected 4-D input [N,C,H,W], got ", x.shape());
  OCTET_CHECK(w.dim() == 4, kOp, ": expected 4-D weight [K,C/groups,R,S], got ", w.shape());
  OCTET_CHECK(x.dtype() == DType::f32, kOp, ": expected an f32 input, got ", x.dtype());
  OCTET_CHECK(w.dtype() == DType::f32, kOp, ": expected an f32 weight, got ", w.dtype());
  OCTET_CHECK(w.device() == x.device(), kOp, ": input is on ", x.device(), " but weight is on ", w.device());
  check_int8_device(x.device(), kOp);
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
  if (!cfg.dsgc_) return int8_absmax(dy);
  const auto usable = [](float v) { return v > 0.0f && std::isfinite(v); };
  const bool stale = !usable(st.grad_clip) || (cfg.clip_relative_ && !usable(st.clip_ratio));
  if (st.backward_steps % cfg.clip_update_period_ != 0 && !stale)
    return cfg.clip_relative_ ? st.clip_ratio * int8_absmax(dy) : st.grad_clip;
  ++st.searches;
  const float clip = dsgc_search(dy).clip;
  if (cfg.clip_relative_) {
    const float m = int8_absmax(dy);
    st.clip_ratio = usable(m) && usable(clip) ? clip / m : 0.0f;
  }
  return clip;
}

void check_layer(const std::shared_ptr<Int8Layer>& layer, const char* op) {
  OCTET_CHECK(layer != nullptr, op, ": expected an Int8Layer (layer state), got a null pointer");
  OCTET_CHECK(layer->config.clip_update_period_ >= 1, op, ": expected config.clip_update_period_ >= 1, got ",
              layer->config.clip_update_period_);
}

// The INT8 backward of the output gradient dy: the clip, rounding and seed of the layer's backward
// step, dx and dw from the kept codes; updates the layer's stats.
Int8ConvGrads int8_backward(const Conv2dGeometry& g, const Tensor& dy, const Int8ConvKept& kept, Int8Layer& L, float sx,
                            float sw, bool want_db) {
  const int64_t step = L.stats.backward_steps;
  const float clip = gradient_clip(dy, L);
  const Int8Rounding rounding = L.config.stochastic_rounding_ ? Int8Rounding::stochastic : Int8Rounding::nearest;
  const uint64_t seed = int8_backward_seed(L.seed, step);
  Int8ConvGrads r = dispatch::int8_conv_backward(g, dy, kept, clip, rounding, seed, sx, sw, want_db);
  L.stats.grad_clip = clip;
  L.stats.cos_distance = cosine_distance(r.sums);
  ++L.stats.backward_steps;
  return r;
}

// The INT8 convolution of geometry g, recorded as `op`: x and w hold g's input and weight
// elements (in NCHW and KCRS order once contiguous, whatever their shapes), the output gets
// `out_shape` (g.n * g.k * g.p * g.q elements) and the gradients x's and w's shapes.
Tensor int8_conv_node(const char* op, const Conv2dGeometry& g, const Tensor& x, const Tensor& w, const Tensor& bias,
                      const Shape& out_shape, const std::shared_ptr<Int8Layer>& layer) {
  const bool record = autograd::needs_grad({x, w, bias});
  const bool rx = record && x.requires_grad(), rw = record && w.requires_grad();
  const bool rb = record && bias.defined() && bias.requires_grad();
  const Shape x4{g.n, g.c, g.h, g.w}, y4{g.n, g.k, g.p, g.q};

  Tensor xc, wc, bc;
  {
    NoGradGuard no_grad;  // the copies feed the kernels only; the node below links x, w, bias
    xc = x.detach().contiguous().reshape(x4);
    wc = w.detach().contiguous().reshape({g.k, g.c / g.groups, g.r, g.s});
    bc = bias.defined() ? bias.detach().contiguous() : Tensor();
  }
  // Forward operands: round to nearest at clip = max|.|.
  const std::array<float, 2> clips = dispatch::absmax_pair(xc, wc);
  const float clip_x = clips[0], clip_w = clips[1];
  layer->stats.input_clip = clip_x, layer->stats.weight_clip = clip_w;
  Tensor out = empty(out_shape, TensorOptions(DType::f32).device(x.device()));
  Int8ConvKept kept = dispatch::int8_conv_forward(g, xc, wc, bc, clip_x, clip_w, out.reshape(y4));
  if (!record) return out;
  // Keep only what a gradient needs: dx reads w's codes, dw reads x's.
  if (!rx) kept.wq = Tensor();
  if (!rw) kept.x = Tensor();
  const float sx = int8_scale(clip_x), sw = int8_scale(clip_w);
  autograd::record(op, {x, w, bias}, {out}, [=, xs = x.shape(), ws = w.shape()](const Grads& gr) {
    Tensor dy = gr[0].contiguous().reshape(y4);
    Tensor dx, dw, db;
    if (rx || rw) {
      const Int8ConvGrads r = int8_backward(g, dy, kept, *layer, sx, sw, rb);
      dx = r.dx.defined() ? r.dx.reshape(xs) : r.dx, dw = r.dw.defined() ? r.dw.reshape(ws) : r.dw, db = r.db;
    }
    if (rb && !db.defined()) db = sum(dy, {0, 2, 3});
    return Grads{dx, dw, db};
  });
  return out;
}

}  // namespace

Tensor int8_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opts,
                   const std::shared_ptr<Int8Layer>& layer) {
  // autocast's bf16 activations reach a layer that computes in INT8: taken up to f32 (exact).
  if (x.defined() && x.dtype() == DType::bf16) return int8_conv2d(x.to(DType::f32), w, bias, opts, layer);
  check_layer(layer, kOp);
  const Conv2dGeometry g = checked_geometry(x, w, bias, opts);
  return autocast_output(int8_conv_node(kOp, g, x, w, bias, {g.n, g.k, g.p, g.q}, layer));
}

Tensor int8_linear(const Tensor& x_in, const Tensor& w, const Tensor& bias, const std::shared_ptr<Int8Layer>& layer) {
  constexpr const char* op = "int8_linear";
  check_layer(layer, op);
  OCTET_CHECK(x_in.defined() && w.defined(), op, ": undefined ", x_in.defined() ? "weight" : "input");
  // autocast may hand a bf16 activation to a layer that computes in INT8: take it up to f32.
  const Tensor x = x_in.dtype() == DType::bf16 ? x_in.to(DType::f32) : x_in;
  OCTET_CHECK(x.dim() >= 1, op, ": expected an input [..., in], got a scalar");
  OCTET_CHECK(w.dim() == 2, op, ": expected a 2-D weight [out, in], got ", w.shape());
  OCTET_CHECK(x.dtype() == DType::f32, op, ": expected an f32 input, got ", x.dtype());
  OCTET_CHECK(w.dtype() == DType::f32, op, ": expected an f32 weight, got ", w.dtype());
  OCTET_CHECK(w.device() == x.device(), op, ": input is on ", x.device(), " but weight is on ", w.device());
  check_int8_device(x.device(), op);
  const int64_t in = w.size(1), out = w.size(0);
  OCTET_CHECK(x.size(-1) == in, op, ": expected input [..., ", in, "] for weight ", w.shape(), ", got ", x.shape());
  OCTET_CHECK(in > 0 && out > 0, op, ": expected a nonempty weight, got ", w.shape());
  if (bias.defined()) {
    OCTET_CHECK(bias.dim() == 1 && bias.size(0) == out, op, ": expected bias of shape [", out, "], got ", bias.shape());
    OCTET_CHECK(bias.dtype() == DType::f32, op, ": expected an f32 bias, got ", bias.dtype());
    OCTET_CHECK(bias.device() == x.device(), op, ": input is on ", x.device(), " but bias is on ", bias.device());
  }
  Shape out_shape = x.shape();
  out_shape.back() = out;
  const int64_t rows = x.numel() / in;
  if (rows == 0) return linear(x, w, bias);  // nothing to quantize: an empty batch, as the float layer gives it
  Conv2dGeometry g{};
  g.n = rows, g.c = in, g.h = 1, g.w = 1, g.k = out, g.r = 1, g.s = 1, g.p = 1, g.q = 1;
  g.stride_h = 1, g.stride_w = 1, g.pad_h = 0, g.pad_w = 0, g.dil_h = 1, g.dil_w = 1, g.groups = 1;
  return autocast_output(int8_conv_node(op, g, x, w, bias, out_shape, layer));
}

Tensor int8_conv2d_batch_norm(const Tensor& z, const BatchNormArgs& bn, const Tensor& w, const Tensor& bias,
                              const Conv2dOptions& opts, const std::shared_ptr<Int8Layer>& layer) {
  OCTET_CHECK(z.defined(), kOp, ": undefined input");
  // The fused batch norm runs where its kernels are (the CPU); elsewhere the two ops, same bits.
  if (!dispatch::supported(dispatch::Kernel::batch_norm_act_codes, z.device()) || z.dtype() != DType::f32)
    return int8_conv2d(batch_norm(z, {.running_mean = bn.running_mean,
                                      .running_var = bn.running_var,
                                      .weight = bn.weight,
                                      .bias = bn.bias,
                                      .training = true,
                                      .momentum = bn.momentum,
                                      .eps = bn.eps,
                                      .act = bn.act}),
                       w, bias, opts, layer);
  check_layer(layer, kOp);
  const Conv2dGeometry g = checked_geometry(z, w, bias, opts);  // z has the activation's shape
  const int64_t c = g.c, count = g.n * g.h * g.w;
  for (const Tensor* t : {&bn.running_mean, &bn.running_var, &bn.weight, &bn.bias})
    OCTET_CHECK(!t->defined() || (t->shape() == Shape{c} && t->dtype() == DType::f32 && t->device() == z.device()), kOp,
                ": batch norm tensors must be f32 [", c, "] on the input's device, got ",
                t->defined() ? t->shape() : Shape{});
  OCTET_CHECK(count > 1, kOp, ": batch norm training needs more than one value per channel, got input shape ",
              z.shape());
  const bool record = autograd::needs_grad({z, bn.weight, bn.bias, w, bias});
  const bool rz = record && z.requires_grad(), rw = record && w.requires_grad();
  const bool rg = record && bn.weight.defined() && bn.weight.requires_grad();
  const bool rbeta = record && bn.bias.defined() && bn.bias.requires_grad();
  const bool rb = record && bias.defined() && bias.requires_grad();
  const bool ry = rz || rg || rbeta;  // the activation's gradient is needed

  Tensor z3, gamma, beta, wc, bc, mean, invstd, xq;
  float clip_x = 0.0f;
  {
    NoGradGuard no_grad;
    z3 = z.detach().contiguous().reshape({g.n, c, g.h * g.w});
    gamma = bn.weight.defined() ? bn.weight.detach().contiguous() : Tensor();
    beta = bn.bias.defined() ? bn.bias.detach().contiguous() : Tensor();
    wc = w.detach().contiguous(), bc = bias.defined() ? bias.detach().contiguous() : Tensor();
    mean = empty({c}), invstd = empty({c}), xq = empty({c, g.n, g.h, g.w}, DType::i8);
    clip_x = dispatch::batch_norm_act_codes(z3, gamma, beta, bn.eps, bn.act, mean, invstd, xq);
  }
  batch_norm_update_running(bn.running_mean, bn.running_var, mean, invstd, count, bn.momentum, bn.eps);
  const float clip_w = dispatch::absmax_of(wc);
  layer->stats.input_clip = clip_x, layer->stats.weight_clip = clip_w;
  Tensor out = empty({g.n, g.k, g.p, g.q});
  Int8ConvKept kept = dispatch::int8_conv_forward_codes(g, xq, clip_x, wc, bc, clip_w, out);
  if (!record) return autocast_output(out);
  if (!ry) kept.wq = Tensor();
  if (!rw) kept.x = Tensor();
  const float sx = int8_scale(clip_x), sw = int8_scale(clip_w);
  const NormActivation act = bn.act;
  const Shape zshape = z.shape();
  using autograd::saved;
  autograd::record("int8_conv2d_batch_norm", {z, bn.weight, bn.bias, w, bias}, {out},
                   [=, sz = saved(z3), sg = saved(gamma), sbeta = saved(ry ? beta : Tensor()), sm = saved(mean),
                    si = saved(invstd)](const Grads& gr) {
                     Tensor dy = gr[0].contiguous();
                     Tensor dz, dgamma, dbeta, dw, db;
                     if (ry || rw) {
                       const Int8ConvGrads r = int8_backward(g, dy, kept, *layer, sx, sw, rb);
                       dw = r.dw, db = r.db;
                       if (ry) {
                         const Tensor& z3v = sz.get();
                         BatchNormGrads n =
                             batch_norm_act_backward(r.dx.reshape(z3v.shape()), z3v, sg.get(), sbeta.get(), sm.get(),
                                                     si.get(), act, rz, rg, rbeta);
                         if (rz) dz = n.dx.reshape(zshape);
                         dgamma = n.dweight, dbeta = n.dbias;
                       }
                     }
                     if (rb && !db.defined()) db = sum(dy, {0, 2, 3});
                     return Grads{dz, dgamma, dbeta, dw, db};
                   });
  return autocast_output(out);
}

Selector<Int8BnFusion>& int8_bn_fusion_selector() {
  static Selector<Int8BnFusion> selector{"INT8 batch norm fusion",
                                         "OCTET_INT8_FUSE_BN",
                                         {{Int8BnFusion::off, "off"}, {Int8BnFusion::on, "on"}},
                                         [](Int8BnFusion) { return true; },
                                         [] { return Int8BnFusion::on; }};
  return selector;
}

bool int8_bn_fusion() { return int8_bn_fusion_selector().active() == Int8BnFusion::on; }
Int8BnFusion set_int8_bn_fusion(Int8BnFusion fusion) { return int8_bn_fusion_selector().set(fusion); }

// ---------------------------------------------------------------- CUDA kernel path setting

Selector<Int8ConvPath>& int8_conv_selector() {
  static Selector<Int8ConvPath> selector{"INT8 convolution path",
                                         "OCTET_INT8_CONV_PATH",
                                         {{Int8ConvPath::automatic, "auto"},
                                          {Int8ConvPath::dp4a, "dp4a"},
                                          {Int8ConvPath::tensor_core, "tensor_core"},
                                          {Int8ConvPath::direct, "direct"}},
                                         // a setting: every choice is accepted, the CPU kernels ignore it
                                         [](Int8ConvPath) { return true; },
                                         [] { return Int8ConvPath::automatic; }};
  return selector;
}

std::string_view int8_conv_path_name(Int8ConvPath path) { return int8_conv_selector().name(path); }
Int8ConvPath parse_int8_conv_path(std::string_view name) { return int8_conv_selector().parse(name); }
Int8ConvPath int8_conv_path() { return int8_conv_selector().active(); }
Int8ConvPath set_int8_conv_path(Int8ConvPath path) { return int8_conv_selector().set(path); }

std::array<Int8ConvPath, 3> int8_conv_last_paths(const Tensor& x, const Tensor& w, const Conv2dOptions& opts) {
  if (!x.defined()) return {Int8ConvPath::automatic, Int8ConvPath::automatic, Int8ConvPath::automatic};
  return dispatch::last_paths(x, checked_geometry(x, w, Tensor(), opts));
}

}  // namespace octet::quant
