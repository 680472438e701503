#include "core/ops/norm.h"

#include <algorithm>

#include "core/autograd.h"
#include "core/kernels.h"
#include "core/memory_format.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace octet {

using autograd::Grads;
using autograd::saved;

namespace {

void check_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias) {
  int64_t k = static_cast<int64_t>(normalized_shape.size());
  OCTET_CHECK(x.defined() && k >= 1 && x.dim() >= k && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
              "layer_norm: input shape ", x.defined() ? x.shape() : Shape{}, " does not end with normalized_shape ",
              normalized_shape);
  OCTET_CHECK(!weight.defined() || weight.shape() == normalized_shape, "layer_norm: weight shape ",
              weight.defined() ? weight.shape() : Shape{}, " differs from ", normalized_shape);
  OCTET_CHECK(!bias.defined() || bias.shape() == normalized_shape, "layer_norm: bias shape ",
              bias.defined() ? bias.shape() : Shape{}, " differs from ", normalized_shape);
}

}  // namespace

Tensor layer_norm_reference(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                            double eps) {
  check_layer_norm(x, normalized_shape, weight, bias);
  // bf16 activations (autocast): statistics and normalization in f32, the output rounded to bf16.
  if (x.dtype() == DType::bf16)
    return layer_norm_reference(x.to(DType::f32), normalized_shape, weight, bias, eps).to(DType::bf16);
  std::vector<int64_t> dims;
  for (int64_t i = x.dim() - static_cast<int64_t>(normalized_shape.size()); i < x.dim(); ++i) dims.push_back(i);
  Tensor mu = mean(x, dims, true);
  Tensor centered = x - mu;
  Tensor y = centered * rsqrt(mean(centered * centered, dims, true) + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  check_layer_norm(x, normalized_shape, weight, bias);
  const int64_t n = shape_numel(normalized_shape), m = n > 0 ? x.numel() / n : 0;
  const DType t = opmath_dtype(x.dtype());
  auto param_ok = [&](const Tensor& p) { return !p.defined() || (p.dtype() == t && p.device() == x.device()); };
  // The fused CPU kernels (f32, f64, bf16 activations computed in f32); on CUDA, or for parameters
  // of another dtype, the composed ops.
  if (!x.device().is_cpu() || !is_floating(x.dtype()) || !param_ok(weight) || !param_ok(bias) || m == 0)
    return layer_norm_reference(x, normalized_shape, weight, bias, eps);
  const TensorOptions stats = TensorOptions(t).device(x.device());
  Tensor x2 = x.contiguous().reshape({m, n});
  Tensor out = empty({m, n}, TensorOptions(x.dtype()).device(x.device())), mu = empty({m}, stats), rstd = empty({m}, stats);
  const Tensor w = weight.defined() ? weight.detach().contiguous().reshape({n}) : Tensor();
  const Tensor b = bias.defined() ? bias.detach().contiguous().reshape({n}) : Tensor();
  kernels::layer_norm_forward(x2.detach(), w, b, eps, out, mu, rstd);
  Tensor y = out.reshape(x.shape());
  if (autograd::needs_grad({x, weight, bias})) {
    const bool rx = x.requires_grad(), rw = weight.defined() && weight.requires_grad(),
               rb = bias.defined() && bias.requires_grad();
    autograd::record("layer_norm", {x, weight, bias}, {y},
                     [=, sx = saved(x2.detach()), sw = saved(w), sm = saved(mu), sr = saved(rstd),
                      xs = x.shape(), ws = normalized_shape](const Grads& g) {
                       const Tensor& xv = sx.get();
                       const TensorOptions o = TensorOptions(t).device(xv.device());
                       Tensor dout = g[0].contiguous().reshape({m, n});
                       Tensor dx = rx ? empty({m, n}, TensorOptions(xv.dtype()).device(xv.device())) : Tensor();
                       Tensor dw = rw ? empty({n}, o) : Tensor(), db = rb ? empty({n}, o) : Tensor();
                       kernels::layer_norm_backward(dout, xv, sw.get(), sm.get(), sr.get(), dx, dw, db);
                       return Grads{rx ? dx.reshape(xs) : Tensor(), rw ? dw.reshape(ws) : Tensor(),
                                    rb ? db.reshape(ws) : Tensor()};
                     });
  }
  return y;
}

void batch_norm_update_running(const Tensor& running_mean, const Tensor& running_var, const Tensor& mean,
                               const Tensor& invstd, int64_t count, double momentum, double eps) {
  if (!running_mean.defined() || !running_var.defined()) return;
  NoGradGuard ng;
  // invstd = 1/sqrt(var + eps)  ->  unbiased var = (1/invstd^2 - eps) * n/(n-1)
  Tensor biased_var = reciprocal(invstd * invstd) - eps;
  Tensor unbiased = biased_var * (static_cast<double>(count) / static_cast<double>(count - 1));
  running_mean.detach().copy_(running_mean * (1.0 - momentum) + mean * momentum);
  running_var.detach().copy_(running_var * (1.0 - momentum) + unbiased * momentum);
}

BatchNormGrads batch_norm_act_backward(const Tensor& dout, const Tensor& x3, const Tensor& weight, const Tensor& bias,
                                       const Tensor& mean, const Tensor& invstd, NormActivation act, bool want_dx,
                                       bool want_dweight, bool want_dbias) {
  TensorOptions o = TensorOptions(x3.dtype()).device(x3.device());
  TensorOptions per_channel = TensorOptions(opmath_dtype(x3.dtype())).device(x3.device());
  BatchNormGrads r;
  r.dout = dout;
  if (act != NormActivation::none) {
    r.dout = empty_in_format_of(x3, x3.shape(), o);
    kernels::batch_norm_act_grad(dout, x3, weight, bias, mean, invstd, act, r.dout);
  }
  const int64_t c = x3.size(1);
  if (want_dx) r.dx = empty_in_format_of(x3, x3.shape(), o);
  if (want_dweight) r.dweight = empty({c}, per_channel);
  if (want_dbias) r.dbias = empty({c}, per_channel);
  kernels::batch_norm_backward(r.dout, x3, weight, mean, invstd, r.dx, r.dweight, r.dbias);
  return r;
}

namespace {

// Shapes, dtypes and devices of batch_norm's arguments, either mode.
void check_batch_norm(const Tensor& x, const BatchNormOptions& o) {
  OCTET_CHECK(x.defined() && x.dim() >= 2, "batch_norm: expected input [N, C, ...], got ",
              x.defined() ? x.shape() : Shape{});
  const Tensor& r = o.residual;
  const bool bf16_mix = r.defined() && r.dtype() != x.dtype() && opmath_dtype(r.dtype()) == opmath_dtype(x.dtype());
  OCTET_CHECK(!r.defined() || (r.shape() == x.shape() && (r.dtype() == x.dtype() || bf16_mix) && r.device() == x.device()),
              "batch_norm: the residual must have the input's shape ", x.shape(), ", dtype ", x.dtype(),
              " (or bf16 with f32) and device, got ", r.defined() ? r.shape() : Shape{},
              r.defined() ? " " + std::string(dtype_name(r.dtype())) : "");
  const int64_t c = x.size(1);
  for (const Tensor* t : {&o.running_mean, &o.running_var, &o.weight, &o.bias})
    OCTET_CHECK(!t->defined() || t->shape() == Shape{c}, "batch_norm: per-channel tensors must have shape [", c,
                "], got ", t->shape());
}

// Evaluation: the running statistics, composed of autograd ops; per-channel tensors broadcast as
// [1, C, 1, ...].
Tensor batch_norm_eval(const Tensor& x, const BatchNormOptions& o) {
  OCTET_CHECK(o.running_mean.defined() && o.running_var.defined(),
              "batch_norm: evaluation mode needs running_mean and running_var");
  Shape bshape(x.dim(), 1);
  bshape[1] = x.size(1);
  auto per_channel = [&](const Tensor& t) { return t.reshape(bshape); };
  Tensor y = (x - per_channel(o.running_mean)) * rsqrt(per_channel(o.running_var) + o.eps);
  if (o.weight.defined()) y = y * per_channel(o.weight);
  if (o.bias.defined()) y = y + per_channel(o.bias);
  if (o.residual.defined()) y = y + o.residual;
  if (o.act == NormActivation::relu) y = relu(y);
  if (o.act == NormActivation::relu6) y = relu6(y);
  return y.dtype() == x.dtype() ? y : y.to(x.dtype());  // bf16 activations stay bf16
}

// The training kernels take x as [N, C, S] in x's layout: on the CPU a 4-D channels-last input
// stays channels-last, and so do the output and the gradients (core/memory_format.h); elsewhere
// [N, C, S] contiguous.
struct Planes {
  bool channels_last;
  Shape shape3;
  // t (x's shape; gradients arrive in any layout) as [N, C, S]
  Tensor to3(const Tensor& t) const {
    return channels_last ? reshape_planes(to_channels_last(t.detach()), shape3) : t.contiguous().reshape(shape3);
  }
  // and back, from [N, C, S] to x's shape
  Tensor from3(const Tensor& t, const Shape& shape) const {
    return channels_last ? reshape_planes(t, shape) : t.reshape(shape);
  }
};

// What the training forward computed that its backward may need.
struct BatchNormSaved {
  Tensor x3, weight, bias, mean, invstd, out;
};

// The backward of act(batch_norm(x) + residual) in training mode. The activation's backward:
// without a residual, from the pre-activation recomputed from x and the statistics (nothing more
// kept); with one, from the output, as relu's backward (relu6's input is inside (0, 6) exactly
// where its output is), which the unfused relu kept too and which is the next block's input, kept
// by its convolution anyway.
void record_batch_norm(const Tensor& x, const BatchNormOptions& o, const Tensor& y, const BatchNormSaved& s,
                       const Planes& planes) {
  const bool rx = x.requires_grad(), rw = o.weight.defined() && o.weight.requires_grad(),
             rb = o.bias.defined() && o.bias.requires_grad(), rr = o.residual.defined() && o.residual.requires_grad();
  const NormActivation act = o.act;
  const bool has_act = act != NormActivation::none, from_output = has_act && o.residual.defined();
  Tensor act_bias = has_act && !from_output ? s.bias : Tensor(), act_out = from_output ? s.out : Tensor();
  autograd::record(
      "batch_norm", {x, o.weight, o.bias, o.residual}, {y},
      [rx, rw, rb, rr, act, from_output, planes, sx = saved(s.x3), sw = saved(s.weight), sb = saved(act_bias),
       sm = saved(s.mean), si = saved(s.invstd), so = saved(act_out)](const Grads& g) {
        const Tensor& x3v = sx.get();
        Tensor dout = planes.to3(g[0]);
        if (from_output) {
          Tensor masked = empty_in_format_of(x3v, x3v.shape(), TensorOptions(x3v.dtype()).device(x3v.device()));
          kernels::binary(act == NormActivation::relu ? BinaryOp::relu_grad : BinaryOp::relu6_grad, dout, so.get(),
                          masked);
          dout = masked;
        }
        BatchNormGrads r = batch_norm_act_backward(dout, x3v, sw.get(), sb.get(), sm.get(), si.get(),
                                                   from_output ? NormActivation::none : act, rx, rw, rb);
        // The residual's gradient is the (masked) output gradient itself.
        return Grads{rx ? planes.from3(r.dx, g[0].shape()) : Tensor(), r.dweight, r.dbias,
                     rr ? planes.from3(r.dout, g[0].shape()) : Tensor()};
      });
}

// Training: one fused kernel for statistics + normalization + affine (+ residual + activation),
// one for the whole backward.
Tensor batch_norm_train(const Tensor& x, const BatchNormOptions& o) {
  const int64_t c = x.size(1), n = x.numel() / std::max<int64_t>(c, 1);
  OCTET_CHECK(n > 1, "batch_norm: training needs more than one value per channel, got input shape ", x.shape());
  OCTET_CHECK(is_floating(x.dtype()), "batch_norm: expected dtype f32, f64 or bf16, got ", x.dtype());
  // bf16 activations (autocast): the statistics, parameters and their gradients f32.
  const DType stats = opmath_dtype(x.dtype());
  for (const Tensor* t : {&o.running_mean, &o.running_var, &o.weight, &o.bias})
    OCTET_CHECK(!t->defined() || t->dtype() == stats, "batch_norm: per-channel tensors must be ", stats, ", got ",
                t->dtype());
  TensorOptions like = TensorOptions(x.dtype()).device(x.device()), like_stats = TensorOptions(stats).device(x.device());
  const Planes planes{keeps_channels_last(x), Shape{x.size(0), c, x.numel() / std::max<int64_t>(x.size(0) * c, 1)}};
  BatchNormSaved s;
  s.x3 = planes.channels_last ? reshape_planes(x, planes.shape3) : x.contiguous().reshape(planes.shape3);
  s.weight = o.weight.defined() ? o.weight.contiguous() : Tensor();
  s.bias = o.bias.defined() ? o.bias.contiguous() : Tensor();
  Tensor r3 = o.residual.defined() ? planes.to3(o.residual) : Tensor();
  s.out = empty_in_format_of(s.x3, planes.shape3, like);
  s.mean = empty({c}, like_stats), s.invstd = empty({c}, like_stats);
  {
    NoGradGuard ng;
    kernels::batch_norm_forward(s.x3.detach(), s.weight.defined() ? s.weight.detach() : s.weight,
                                s.bias.defined() ? s.bias.detach() : s.bias, o.eps, s.out, s.mean, s.invstd, o.act,
                                r3.defined() ? r3.detach() : r3);
  }
  Tensor y = planes.from3(s.out, x.shape());
  batch_norm_update_running(o.running_mean, o.running_var, s.mean, s.invstd, n, o.momentum, o.eps);
  if (autograd::needs_grad({x, o.weight, o.bias, o.residual})) record_batch_norm(x, o, y, s, planes);
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const BatchNormOptions& options) {
  check_batch_norm(x, options);
  const Tensor& r = options.residual;
  if (r.defined() && r.dtype() != x.dtype()) {
    // A residual of another dtype (bf16 activations beside f32 ones): as `bn(x) + r` promotes.
    BatchNormOptions o = options;
    if (x.dtype() != DType::bf16) {  // r widened exactly to x's dtype: the fused kernel's bits
      o.residual = r.to(x.dtype());
      return batch_norm(x, o);
    }
    o.residual = Tensor(), o.act = NormActivation::none;
    Tensor y = batch_norm(x, o) + r;
    if (options.act == NormActivation::relu) return relu(y);
    return options.act == NormActivation::relu6 ? relu6(y) : y;
  }
  return options.training ? batch_norm_train(x, options) : batch_norm_eval(x, options);
}

}  // namespace octet
